// Typed op attributes. An AttrMap is an ordered name -> AttrValue map (ordered so that printing
// and hashing are deterministic). OpDef::ValidateAttrs checks types and fills defaults; after
// that, kernels and rules read attributes with the CHECK-ing accessors (the values are known to
// be present and well typed), while user-facing code uses the StatusOr getters.
#ifndef ONEFLOW_LIKE_CORE_ATTR_H_
#define ONEFLOW_LIKE_CORE_ATTR_H_

#include <cstdint>
#include <map>
#include <string>
#include <variant>
#include <vector>

#include "oneflow_like/core/data_type.h"
#include "oneflow_like/core/status.h"

namespace oneflow_like {

enum class AttrType { kInt, kFloat, kBool, kString, kInts, kFloats, kDataType };
std::string AttrTypeName(AttrType t);

using AttrValue = std::variant<int64_t, double, bool, std::string, std::vector<int64_t>,
                               std::vector<double>, DataType>;
AttrType TypeOf(const AttrValue& v);
// Human-readable, parseable by the compiler's text format: 3, 0.5, true, "gelu", [1,2], float32.
std::string AttrValueToString(const AttrValue& v);

class AttrMap {
 public:
  AttrMap() = default;
  AttrMap(std::initializer_list<std::pair<const std::string, AttrValue>> init) : values_(init) {}

  AttrMap& Set(const std::string& name, AttrValue v) {
    values_[name] = std::move(v);
    return *this;
  }
  bool Has(const std::string& name) const { return values_.count(name) > 0; }
  const std::map<std::string, AttrValue>& values() const { return values_; }

  // CHECK-ing accessors (for kernels and rules after validation).
  int64_t Int(const std::string& name) const;
  double Float(const std::string& name) const;
  bool Bool(const std::string& name) const;
  const std::string& String(const std::string& name) const;
  const std::vector<int64_t>& Ints(const std::string& name) const;
  const std::vector<double>& Floats(const std::string& name) const;
  DataType Dtype(const std::string& name) const;

  // "{a=1, b=[2,3]}"
  std::string ToString() const;
  friend bool operator==(const AttrMap& a, const AttrMap& b) { return a.values_ == b.values_; }

 private:
  const AttrValue& Get(const std::string& name, AttrType type) const;
  std::map<std::string, AttrValue> values_;
};

}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_CORE_ATTR_H_
