#include "tools/train/cuda_device_choice.h"

#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace oneflow_like {
namespace {

std::string VisibleText(const char* cuda_visible_devices) {
  return cuda_visible_devices == nullptr ? std::string("CUDA_VISIBLE_DEVICES unset")
                                         : absl::StrCat("CUDA_VISIBLE_DEVICES='", cuda_visible_devices, "'");
}

// The entries CUDA_VISIBLE_DEVICES lists ("0", "2,3", "GPU-uuid"); -1 when unset.
int ListedDevices(const char* cuda_visible_devices) {
  if (cuda_visible_devices == nullptr) return -1;
  int n = 0;
  for (absl::string_view entry : absl::StrSplit(cuda_visible_devices, ',')) {
    if (!absl::StripAsciiWhitespace(entry).empty()) ++n;
  }
  return n;
}

absl::StatusOr<int> Ordinal(const char* name, const char* value) {
  int v = 0;
  if (!absl::SimpleAtoi(value, &v) || v < 0) {
    return absl::InvalidArgumentError(absl::StrCat(name, "='", value, "' is not a CUDA device ordinal"));
  }
  return v;
}

}  // namespace

absl::StatusOr<int> ChooseCudaDevice(const char* ol_cuda_device, const char* local_rank,
                                     const char* cuda_visible_devices, int visible_count) {
  if (visible_count <= 0) {
    return absl::UnavailableError(absl::StrCat("no CUDA device visible (", VisibleText(cuda_visible_devices), ")"));
  }
  if (ol_cuda_device != nullptr && *ol_cuda_device != '\0') {
    absl::StatusOr<int> d = Ordinal("OL_CUDA_DEVICE", ol_cuda_device);
    if (!d.ok()) return d.status();
    if (*d >= visible_count) {
      return absl::InvalidArgumentError(absl::StrCat("OL_CUDA_DEVICE=", *d, " but this process sees ", visible_count,
                                                     " CUDA device(s) (", VisibleText(cuda_visible_devices), ")"));
    }
    return *d;
  }
  if (local_rank != nullptr && *local_rank != '\0') {
    absl::StatusOr<int> r = Ordinal("LOCAL_RANK", local_rank);
    if (!r.ok()) return r.status();
    if (ListedDevices(cuda_visible_devices) == 1) return 0;  // this process's own GPU
    if (*r >= visible_count) {
      return absl::InvalidArgumentError(absl::StrCat(
          "LOCAL_RANK=", *r, " picks CUDA device ", *r, ", but this process sees ", visible_count,
          " CUDA device(s) (", VisibleText(cuda_visible_devices),
          "); give each process one GPU (CUDA_VISIBLE_DEVICES=<its GPU>) or all of them, or set OL_CUDA_DEVICE"));
    }
    return *r;
  }
  return 0;
}

}  // namespace oneflow_like
