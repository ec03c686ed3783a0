#include "oneflow_like/compiler/pipeline/stage_partition.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"

namespace oneflow_like {
namespace compiler {
namespace {

constexpr double kInfinity = std::numeric_limits<double>::infinity();

absl::Status Invalid(const std::string& message) {
  return absl::InvalidArgumentError(absl::StrCat("stage partition: ", message));
}

absl::Status CheckProblem(const StagePartitionProblem& problem) {
  const size_t num_stages = problem.cost.size();
  if (num_stages == 0) return Invalid("no stages (hint: give at least one stage)");
  const size_t n = problem.cost[0].size();
  for (size_t s = 0; s < num_stages; ++s) {
    if (problem.cost[s].size() != n) {
      return Invalid(absl::StrCat("stage ", s, " has ", problem.cost[s].size(), " costs but stage 0 has ", n));
    }
    for (size_t i = 0; i < n; ++i) {
      const double c = problem.cost[s][i];
      if (!(c >= 0) || !std::isfinite(c)) {
        return Invalid(absl::StrCat("item ", i, " costs ", c, " in stage ", s, " (costs must be finite and >= 0)"));
      }
    }
  }
  if (!problem.allowed.empty() && problem.allowed.size() != n) {
    return Invalid(absl::StrCat(problem.allowed.size(), " allowed-stage entries for ", n, " items"));
  }
  for (size_t i = 0; i < problem.allowed.size(); ++i) {
    if (!problem.allowed[i].empty() && problem.allowed[i].size() != num_stages) {
      return Invalid(absl::StrCat("item ", i, " has ", problem.allowed[i].size(), " allowed-stage flags for ",
                                  num_stages, " stages"));
    }
  }
  if (n < num_stages) {
    return Invalid(absl::StrCat(num_stages, " stages but only ", n,
                                " items (hint: every stage needs at least one; use fewer stages)"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<StagePartition> PartitionStages(const StagePartitionProblem& problem) {
  RETURN_IF_ERROR(CheckProblem(problem));
  const int num_stages = static_cast<int>(problem.cost.size());
  const int64_t n = static_cast<int64_t>(problem.cost[0].size());

  // prefix[s][i]: cost of items [0, i) in stage s. barred[s][i]: the last item before i that
  // may not go to stage s (-1 if none); stage s may take items [j, i) iff barred[s][i] < j.
  std::vector<std::vector<double>> prefix(num_stages, std::vector<double>(n + 1, 0));
  std::vector<std::vector<int64_t>> barred(num_stages, std::vector<int64_t>(n + 1, -1));
  for (int s = 0; s < num_stages; ++s) {
    for (int64_t i = 0; i < n; ++i) {
      prefix[s][i + 1] = prefix[s][i] + problem.cost[s][i];
      const bool allowed = problem.allowed.empty() || problem.allowed[i].empty() || problem.allowed[i][s];
      barred[s][i + 1] = allowed ? barred[s][i] : i;
    }
  }
  auto segment = [&](int s, int64_t j, int64_t i) { return prefix[s][i] - prefix[s][j]; };

  // Phase 1: best[k][i] = the smallest bottleneck of items [0, i) cut into stages 0 .. k-1.
  std::vector<std::vector<double>> best(num_stages + 1, std::vector<double>(n + 1, kInfinity));
  best[0][0] = 0;
  for (int k = 1; k <= num_stages; ++k) {
    const int s = k - 1;
    for (int64_t i = k; i <= n; ++i) {
      if (k == 1) {
        if (barred[0][i] < 0) best[1][i] = prefix[0][i];
        continue;
      }
      double b = kInfinity;
      for (int64_t j = i - 1; j >= k - 1 && j > barred[s][i]; --j) {  // stage s takes items [j, i)
        const double c = segment(s, j, i);
        if (c >= b) break;  // earlier cut points only make stage s dearer
        b = std::min(b, std::max(best[k - 1][j], c));
      }
      best[k][i] = b;
    }
  }
  const double bottleneck = best[num_stages][n];
  if (bottleneck == kInfinity) return Invalid("no contiguous cut puts every item in a stage it is allowed in");

  // Phase 2: among cuts with every stage <= bottleneck, the smallest sum of squared stage costs.
  std::vector<std::vector<double>> squares(num_stages + 1, std::vector<double>(n + 1, kInfinity));
  std::vector<std::vector<int64_t>> cut(num_stages + 1, std::vector<int64_t>(n + 1, -1));
  squares[0][0] = 0;
  for (int k = 1; k <= num_stages; ++k) {
    const int s = k - 1;
    for (int64_t i = k; i <= n; ++i) {
      for (int64_t j = i - 1; j >= k - 1 && j > barred[s][i]; --j) {
        const double c = segment(s, j, i);
        if (c > bottleneck) break;
        if (squares[k - 1][j] == kInfinity) continue;
        const double v = squares[k - 1][j] + c * c;
        if (v < squares[k][i]) {
          squares[k][i] = v;
          cut[k][i] = j;
        }
      }
    }
  }
  if (cut[num_stages][n] < 0) return absl::InternalError("stage partition: phase 2 lost the optimal cut");

  StagePartition result;
  result.stage_of.assign(n, 0);
  result.stage_seconds.assign(num_stages, 0);
  result.bottleneck_seconds = bottleneck;
  for (int64_t k = num_stages, i = n; k >= 1; --k) {
    const int64_t j = cut[k][i];
    for (int64_t t = j; t < i; ++t) result.stage_of[t] = static_cast<int>(k - 1);
    result.stage_seconds[k - 1] = segment(static_cast<int>(k - 1), j, i);
    i = j;
  }
  return result;
}

}  // namespace compiler
}  // namespace oneflow_like
