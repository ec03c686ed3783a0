#include "oneflow_like/core/attr.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "glog/logging.h"

namespace oneflow_like {

std::string AttrTypeName(AttrType t) {
  switch (t) {
    case AttrType::kInt: return "int";
    case AttrType::kFloat: return "float";
    case AttrType::kBool: return "bool";
    case AttrType::kString: return "string";
    case AttrType::kInts: return "ints";
    case AttrType::kFloats: return "floats";
    case AttrType::kDataType: return "dtype";
  }
  return "?";
}

AttrType TypeOf(const AttrValue& v) { return static_cast<AttrType>(v.index()); }

std::string AttrValueToString(const AttrValue& v) {
  switch (TypeOf(v)) {
    case AttrType::kInt: return absl::StrCat(std::get<int64_t>(v));
    case AttrType::kFloat: return absl::StrCat(std::get<double>(v));
    case AttrType::kBool: return std::get<bool>(v) ? "true" : "false";
    case AttrType::kString: return absl::StrCat("\"", std::get<std::string>(v), "\"");
    case AttrType::kInts: return absl::StrCat("[", absl::StrJoin(std::get<std::vector<int64_t>>(v), ","), "]");
    case AttrType::kFloats: return absl::StrCat("[", absl::StrJoin(std::get<std::vector<double>>(v), ","), "]");
    case AttrType::kDataType: return DataTypeName(std::get<DataType>(v));
  }
  return "?";
}

const AttrValue& AttrMap::Get(const std::string& name, AttrType type) const {
  auto it = values_.find(name);
  CHECK(it != values_.end()) << "missing attribute '" << name << "'";
  CHECK(TypeOf(it->second) == type) << "attribute '" << name << "' is " << AttrTypeName(TypeOf(it->second))
                                    << ", not " << AttrTypeName(type);
  return it->second;
}

int64_t AttrMap::Int(const std::string& n) const { return std::get<int64_t>(Get(n, AttrType::kInt)); }
double AttrMap::Float(const std::string& n) const { return std::get<double>(Get(n, AttrType::kFloat)); }
bool AttrMap::Bool(const std::string& n) const { return std::get<bool>(Get(n, AttrType::kBool)); }
const std::string& AttrMap::String(const std::string& n) const {
  return std::get<std::string>(Get(n, AttrType::kString));
}
const std::vector<int64_t>& AttrMap::Ints(const std::string& n) const {
  return std::get<std::vector<int64_t>>(Get(n, AttrType::kInts));
}
const std::vector<double>& AttrMap::Floats(const std::string& n) const {
  return std::get<std::vector<double>>(Get(n, AttrType::kFloats));
}
DataType AttrMap::Dtype(const std::string& n) const { return std::get<DataType>(Get(n, AttrType::kDataType)); }

std::string AttrMap::ToString() const {
  std::vector<std::string> parts;
  for (const auto& [k, v] : values_) parts.push_back(absl::StrCat(k, "=", AttrValueToString(v)));
  return absl::StrCat("{", absl::StrJoin(parts, ", "), "}");
}

}  // namespace oneflow_like
