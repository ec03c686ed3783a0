// Test hooks of nccl_fake.cc, the in-process fake of the CUDA runtime and NCCL calls that
// nccl_collective.cc and its test use (see there). Only nccl_collective_fake_test links it.
#ifndef ONEFLOW_LIKE_COMM_NCCL_FAKE_H_
#define ONEFLOW_LIKE_COMM_NCCL_FAKE_H_

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstdint>

namespace oneflow_like {
namespace comm {
namespace nccl_fake {

// From now on ncclCommGetAsyncError reports `error` on every communicator alive (what NCCL does
// when a peer's connection breaks); ncclSuccess clears it.
void InjectAsyncError(ncclResult_t error);

// Collective steps that found the members disagreeing (kind, count, dtype or root): a mapping
// bug in the backend. Each also fails the communicators with ncclInvalidUsage.
int MismatchCount();

// From now on cudaEventSynchronize returns `error` (as CUDA does after a fault inside a kernel:
// the error is sticky); cudaSuccess clears it.
void InjectEventSyncError(cudaError_t error);
// cudaEventCreateWithFlags calls so far.
int64_t EventsCreated();
// ncclCommInitRankConfig calls so far (every member's: the communicators made in this process).
int64_t CommInits();

}  // namespace nccl_fake
}  // namespace comm
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_COMM_NCCL_FAKE_H_
