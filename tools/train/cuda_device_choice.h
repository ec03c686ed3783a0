// Which CUDA device ordinal oltrain_cuda's process uses, from its environment (a pure function,
// so the rules are unit-tested without a GPU):
//
//   OL_CUDA_DEVICE=i        device i (must be < the visible count)
//   else LOCAL_RANK=r       (olrun: one process per GPU)
//     - CUDA_VISIBLE_DEVICES names exactly one device: 0, whatever r is (the launcher gave this
//       process its own GPU, which CUDA numbers 0);
//     - else device r, which must be < the visible count.
//   else                    device 0
//
// There is no modulo: a LOCAL_RANK past the visible devices is an error (InvalidArgument) that
// names LOCAL_RANK, the visible count and CUDA_VISIBLE_DEVICES, never a silent fallback. A
// value that is not a non-negative integer is InvalidArgument too; no visible device is
// Unavailable. Null arguments: the variable is unset.
#ifndef TOOLS_TRAIN_CUDA_DEVICE_CHOICE_H_
#define TOOLS_TRAIN_CUDA_DEVICE_CHOICE_H_

#include "absl/status/statusor.h"

namespace oneflow_like {

// `visible_count`: cudaGetDeviceCount's answer (CUDA_VISIBLE_DEVICES already applied).
absl::StatusOr<int> ChooseCudaDevice(const char* ol_cuda_device, const char* local_rank,
                                     const char* cuda_visible_devices, int visible_count);

}  // namespace oneflow_like

#endif  // TOOLS_TRAIN_CUDA_DEVICE_CHOICE_H_
