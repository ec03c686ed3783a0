// oltrain's main, shared by the CPU binary (oltrain) and the CUDA build's (oltrain_cuda), which
// differ only in the device backend they hand the trainer (actor/device_backend.h).
#ifndef TOOLS_TRAIN_OLTRAIN_MAIN_H_
#define TOOLS_TRAIN_OLTRAIN_MAIN_H_

#include "absl/status/status.h"
#include "oneflow_like/actor/device_backend.h"
#include "oneflow_like/actor/session.h"

namespace oneflow_like {

// Parses the flags (or --config), then trains in this process or as one rank of an olrun job.
// `device_backend`: runs `--device=cuda` placements; null: cpu only. `collective_factory`: the
// collective backend of COLLECTIVE tasks (NCCL for cuda placements); null: gloo. Returns the
// exit code. `no_backend_reason` (with a null `device_backend`): why the build's device backend
// could not be made (oltrain_cuda: no GPU, a bad LOCAL_RANK); a job that asks for a device
// placement then exits 3 (a preflight failure: olrun does not restart it) with that reason,
// instead of the generic "no backend" error. cpu jobs run.
int OltrainMain(int argc, char** argv, actor::DeviceBackend* device_backend,
                decltype(actor::SessionOptions::collective_factory) collective_factory = nullptr,
                const absl::Status& no_backend_reason = absl::OkStatus());

}  // namespace oneflow_like

#endif  // TOOLS_TRAIN_OLTRAIN_MAIN_H_
