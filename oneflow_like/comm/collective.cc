#include "oneflow_like/comm/collective.h"

#include <chrono>

#include "absl/strings/str_cat.h"

namespace oneflow_like {
namespace comm {

absl::Status InMemoryStore::Set(const std::string& key, const std::string& value) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    values_[key] = value;
  }
  changed_.notify_all();
  return absl::OkStatus();
}

absl::StatusOr<std::string> InMemoryStore::Get(const std::string& key, int64_t timeout_ms) {
  std::unique_lock<std::mutex> lock(mu_);
  const bool found = changed_.wait_for(lock, std::chrono::milliseconds(timeout_ms),
                                       [&] { return values_.count(key) > 0; });
  if (!found) {
    return absl::DeadlineExceededError(absl::StrCat("rendezvous key '", key, "' not set within ", timeout_ms, " ms"));
  }
  return values_.at(key);
}

absl::Status CheckCounts(const std::vector<int64_t>& counts, int32_t group_size, const std::string& what) {
  if (static_cast<int32_t>(counts.size()) != group_size) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": ", counts.size(), " counts for a group of ", group_size, " (one per member)"));
  }
  for (size_t k = 0; k < counts.size(); ++k) {
    if (counts[k] < 0) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": count of member ", k, " is negative (", counts[k], ")"));
    }
  }
  return absl::OkStatus();
}

int64_t SumCounts(const std::vector<int64_t>& counts) {
  int64_t sum = 0;
  for (int64_t c : counts) sum += c;
  return sum;
}

}  // namespace comm
}  // namespace oneflow_like
