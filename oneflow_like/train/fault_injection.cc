#include "oneflow_like/train/fault_injection.h"

#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"

namespace oneflow_like {
namespace train {

void MaybeInjectFault(const std::string& phase, int32_t rank, int64_t step) {
  const char* spec = std::getenv("OL_FAULT_INJECT");
  if (spec == nullptr || *spec == '\0') return;
  std::map<std::string, std::string> fields;
  for (absl::string_view part : absl::StrSplit(spec, ',')) {
    std::vector<std::string> kv = absl::StrSplit(part, absl::MaxSplits('=', 1));
    if (kv.size() != 2) {
      std::fprintf(stderr, "OL_FAULT_INJECT='%s': expected rank=R,at=PHASE[,step=S][,round=K]; ignored\n", spec);
      return;
    }
    fields[kv[0]] = kv[1];
  }
  int64_t target_rank = -1, target_step = -1, target_round = -1, round = 0;
  if (!absl::SimpleAtoi(fields["rank"], &target_rank) || fields["at"].empty() ||
      (fields.count("step") && !absl::SimpleAtoi(fields["step"], &target_step)) ||
      (fields.count("round") && !absl::SimpleAtoi(fields["round"], &target_round))) {
    std::fprintf(stderr, "OL_FAULT_INJECT='%s': expected rank=R,at=PHASE[,step=S][,round=K]; ignored\n", spec);
    return;
  }
  const char* round_text = std::getenv("OL_RESTART_ROUND");
  if (round_text != nullptr && !absl::SimpleAtoi(round_text, &round)) round = 0;
  if (target_rank != rank || fields["at"] != phase || (phase == "step" && target_step != step)) return;
  if (fields.count("round") && target_round != round) return;
  std::fprintf(stderr, "OL_FAULT_INJECT: rank %d kills itself (SIGKILL) at %s%s\n", rank, phase.c_str(),
               phase == "step" ? (" " + std::to_string(step)).c_str() : "");
  std::fflush(stderr);
  kill(getpid(), SIGKILL);
}

}  // namespace train
}  // namespace oneflow_like
