// OpRegistry: the set of known OpDefs, filled explicitly (no static registration):
//
//   OpRegistry registry;
//   RegisterBuiltinOps(&registry);   // oneflow_like/core/ops/builtin_ops.h
//   ASSIGN_OR_RETURN(const OpDef* def, registry.Get("matmul"));
//
// Thread-safety: Register is not thread-safe; after registration, lookups are (const).
#ifndef ONEFLOW_LIKE_CORE_OP_REGISTRY_H_
#define ONEFLOW_LIKE_CORE_OP_REGISTRY_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "oneflow_like/core/op_def.h"

namespace oneflow_like {

class OpRegistry {
 public:
  // InvalidArgument if the name is taken or the def is incomplete (no infer/sbp/kernel).
  absl::Status Register(OpDef def);
  // nullptr if unknown.
  const OpDef* Find(const std::string& name) const;
  // NotFound naming the op and the closest known names.
  absl::StatusOr<const OpDef*> Get(const std::string& name) const;
  std::vector<std::string> Names() const;  // sorted

 private:
  std::map<std::string, std::unique_ptr<OpDef>> ops_;
};

}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_CORE_OP_REGISTRY_H_
