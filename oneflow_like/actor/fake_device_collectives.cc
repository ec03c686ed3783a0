#include "oneflow_like/actor/fake_device_collectives.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "oneflow_like/core/data_type.h"

namespace oneflow_like {
namespace actor {
namespace {

class FakeDeviceCommunicator final : public comm::Communicator {
 public:
  FakeDeviceCommunicator(std::unique_ptr<comm::Communicator> host, FakeDeviceBackend* device,
                         std::shared_ptr<std::atomic<int64_t>> calls)
      : host_(std::move(host)), device_(device), calls_(std::move(calls)) {}
  int32_t rank() const override { return host_->rank(); }
  int32_t size() const override { return host_->size(); }
  std::string description() const override { return "fake device " + host_->description(); }

  void AllReduce(const void* in, void* out, int64_t count, DataType dtype, comm::CollectiveDone done) override {
    char *i = nullptr, *o = nullptr;
    if (!Translate(in, count, dtype, &i, done) || !Translate(out, count, dtype, &o, done)) return;
    host_->AllReduce(i, o, count, dtype, std::move(done));
  }
  void AllGather(const void* in, void* out, std::vector<int64_t> counts, DataType dtype,
                 comm::CollectiveDone done) override {
    char *i = nullptr, *o = nullptr;
    if (!Translate(in, counts[rank()], dtype, &i, done) || !Translate(out, comm::SumCounts(counts), dtype, &o, done)) {
      return;
    }
    host_->AllGather(i, o, std::move(counts), dtype, std::move(done));
  }
  void ReduceScatter(const void* in, void* out, std::vector<int64_t> counts, DataType dtype,
                     comm::CollectiveDone done) override {
    char *i = nullptr, *o = nullptr;
    if (!Translate(in, comm::SumCounts(counts), dtype, &i, done) || !Translate(out, counts[rank()], dtype, &o, done)) {
      return;
    }
    host_->ReduceScatter(i, o, std::move(counts), dtype, std::move(done));
  }
  void Broadcast(void* buffer, int64_t count, DataType dtype, int32_t root, comm::CollectiveDone done) override {
    char* b = nullptr;
    if (!Translate(buffer, count, dtype, &b, done)) return;
    host_->Broadcast(b, count, dtype, root, std::move(done));
  }
  void AllToAll(const void* in, std::vector<int64_t> send_counts, void* out, std::vector<int64_t> recv_counts,
                DataType dtype, comm::CollectiveDone done) override {
    char *i = nullptr, *o = nullptr;
    if (!Translate(in, comm::SumCounts(send_counts), dtype, &i, done) ||
        !Translate(out, comm::SumCounts(recv_counts), dtype, &o, done)) {
      return;
    }
    host_->AllToAll(i, std::move(send_counts), o, std::move(recv_counts), dtype, std::move(done));
  }
  void Send(const void* in, int64_t count, DataType dtype, int32_t peer, comm::CollectiveDone done) override {
    char* i = nullptr;
    if (!Translate(in, count, dtype, &i, done)) return;
    host_->Send(i, count, dtype, peer, std::move(done));
  }
  void Recv(void* out, int64_t count, DataType dtype, int32_t peer, comm::CollectiveDone done) override {
    char* o = nullptr;
    if (!Translate(out, count, dtype, &o, done)) return;
    host_->Recv(o, count, dtype, peer, std::move(done));
  }
  absl::Status Flush() override { return host_->Flush(); }

 private:
  // The shadow of `count` elements at device address `p`; false (and `done` called) if they are
  // not fake-device memory.
  bool Translate(const void* p, int64_t count, DataType dtype, char** shadow, const comm::CollectiveDone& done) {
    calls_->fetch_add(1);
    const int64_t bytes = count * SizeOf(dtype);
    if (bytes == 0) {
      *shadow = static_cast<char*>(const_cast<void*>(p));
      return true;
    }
    *shadow = device_->Shadow(p, bytes);
    if (*shadow != nullptr) return true;
    done(absl::InternalError(absl::StrCat(description(), ": a buffer of ", bytes,
                                          " bytes is not device memory (the runtime passed host memory to a device "
                                          "collective)")));
    return false;
  }
  std::unique_ptr<comm::Communicator> host_;
  FakeDeviceBackend* device_;
  std::shared_ptr<std::atomic<int64_t>> calls_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<comm::Communicator>> FakeDeviceCollectives::Connect(const std::vector<int32_t>& group,
                                                                                  const std::string& tag) {
  ASSIGN_OR_RETURN(std::unique_ptr<comm::Communicator> host, host_->Connect(group, tag));
  return std::unique_ptr<comm::Communicator>(std::make_unique<FakeDeviceCommunicator>(std::move(host), device_, calls_));
}

absl::StatusOr<std::unique_ptr<comm::Communicator>> FakeDeviceCollectives::ConnectChannel(
    const std::vector<int32_t>& group, uint64_t channel, const std::string& tag) {
  ASSIGN_OR_RETURN(std::unique_ptr<comm::Communicator> host, host_->ConnectChannel(group, channel, tag));
  return std::unique_ptr<comm::Communicator>(std::make_unique<FakeDeviceCommunicator>(std::move(host), device_, calls_));
}

int64_t FakeDeviceCollectives::calls() const { return calls_->load(); }

}  // namespace actor
}  // namespace oneflow_like
