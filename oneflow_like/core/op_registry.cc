#include "oneflow_like/core/op_registry.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace oneflow_like {

absl::Status OpRegistry::Register(OpDef def) {
  if (def.name.empty()) return absl::InvalidArgumentError("OpRegistry::Register: op without a name");
  if (ops_.count(def.name)) {
    return absl::InvalidArgumentError(absl::StrCat("op '", def.name, "' is registered twice"));
  }
  if (!def.infer || !def.sbp || !def.cpu_kernel) {
    return absl::InvalidArgumentError(absl::StrCat("op '", def.name,
                                                   "' needs an infer function, SBP signatures and a CPU kernel"));
  }
  std::string name = def.name;
  ops_.emplace(name, std::make_unique<OpDef>(std::move(def)));
  return absl::OkStatus();
}

const OpDef* OpRegistry::Find(const std::string& name) const {
  auto it = ops_.find(name);
  return it == ops_.end() ? nullptr : it->second.get();
}

absl::StatusOr<const OpDef*> OpRegistry::Get(const std::string& name) const {
  if (const OpDef* def = Find(name)) return def;
  // Suggest names sharing the first two letters.
  std::vector<std::string> close;
  for (const auto& [n, _] : ops_) {
    if (n.size() >= 2 && name.size() >= 2 && n.compare(0, 2, name, 0, 2) == 0) close.push_back(n);
  }
  return absl::NotFoundError(absl::StrCat("unknown op '", name, "'",
                                          close.empty() ? "" : absl::StrCat(" (did you mean: ", absl::StrJoin(close, ", "), "?)")));
}

std::vector<std::string> OpRegistry::Names() const {
  std::vector<std::string> names;
  for (const auto& [n, _] : ops_) names.push_back(n);
  return names;
}

}  // namespace oneflow_like
