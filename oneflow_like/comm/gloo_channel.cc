#include "oneflow_like/comm/gloo_channel.h"

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <exception>
#include <functional>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gloo/allgatherv.h"
#include "gloo/allreduce.h"
#include "gloo/alltoallv.h"
#include "gloo/broadcast.h"
#include "gloo/common/error.h"
#include "gloo/math.h"
#include "oneflow_like/core/status.h"

namespace oneflow_like {
namespace comm {
namespace {

uint16_t FloatToBf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if ((bits & 0x7fffffff) > 0x7f800000) return static_cast<uint16_t>((bits >> 16) | 0x40);  // NaN stays NaN
  bits += 0x7fff + ((bits >> 16) & 1);  // round to nearest even
  return static_cast<uint16_t>(bits >> 16);
}
float Bf16ToFloat(uint16_t h) {
  const uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}
void SumBf16(void* c, const void* a, const void* b, size_t n) {
  uint16_t* out = static_cast<uint16_t*>(c);
  const uint16_t* x = static_cast<const uint16_t*>(a);
  const uint16_t* y = static_cast<const uint16_t*>(b);
  for (size_t i = 0; i < n; ++i) out[i] = FloatToBf16(Bf16ToFloat(x[i]) + Bf16ToFloat(y[i]));
}

// One call: runs on the worker; returns its status.
struct Call {
  std::string what;
  std::function<void()> run;  // may throw gloo::Exception
  CollectiveDone done;
};

// One channel: its calls run one at a time in issue order on its own worker thread. On a
// shared context the channels of the group run concurrently, each in its tag space.
class GlooCommunicator final : public Communicator {
 public:
  GlooCommunicator(std::shared_ptr<GlooGroupContext> group, std::string tag, GlooTagSpace space, int64_t timeout_ms)
      : group_(std::move(group)), context_(group_->context()), tag_(std::move(tag)), space_(space),
        timeout_(timeout_ms) {
    worker_ = std::thread([this] { Loop(); });
  }
  ~GlooCommunicator() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    wake_.notify_all();
    worker_.join();
  }

  int32_t rank() const override { return context_->rank; }
  int32_t size() const override { return context_->size; }
  std::string description() const override {
    return absl::StrCat("gloo group [", absl::StrJoin(group_->group(), ","), "] '", tag_, "' (member ", context_->rank,
                        group_->shared() ? absl::StrCat(", tag space ", space_.slot, " of the group's shared context")
                                         : std::string(),
                        ")");
  }

  void AllReduce(const void* in, void* out, int64_t count, DataType dtype, CollectiveDone done) override {
    if (count < 0) return Reject("all_reduce", absl::StrCat("negative count ", count), std::move(done));
    if (!Summable(dtype)) return Reject("all_reduce", Unsupported(dtype), std::move(done));
    Enqueue("all_reduce", [=] {
      if (count == 0) return;
      // Out of place, gloo reads `in` itself (copied into `out` a segment at a time inside its
      // ring, while the segment is in cache), rather than a whole-tensor memcpy first.
      ::gloo::AllreduceOptions opts(context_);
      opts.setTag(NextTag());
      opts.setTimeout(timeout_);
      switch (dtype) {
        case DataType::kFloat32: Reduce<float>(&opts, in, out, count, &::gloo::sum<float>); break;
        case DataType::kFloat64: Reduce<double>(&opts, in, out, count, &::gloo::sum<double>); break;
        case DataType::kInt32: Reduce<int32_t>(&opts, in, out, count, &::gloo::sum<int32_t>); break;
        case DataType::kInt64: Reduce<int64_t>(&opts, in, out, count, &::gloo::sum<int64_t>); break;
        case DataType::kFloat16:
          Reduce<::gloo::float16>(&opts, in, out, count, &::gloo::sum<::gloo::float16>);
          break;
        default: Reduce<uint16_t>(&opts, in, out, count, &SumBf16); break;  // bfloat16
      }
      ::gloo::allreduce(opts);
    }, std::move(done));
  }

  void AllGather(const void* in, void* out, std::vector<int64_t> counts, DataType dtype,
                 CollectiveDone done) override {
    if (absl::Status s = CheckCall("all_gather", counts, dtype); !s.ok()) return Fail(s, std::move(done));
    Enqueue("all_gather", [=] {
      const size_t es = static_cast<size_t>(SizeOf(dtype));
      if (SumCounts(counts) == 0) return;
      ::gloo::AllgathervOptions opts(context_);
      opts.setTag(NextTag());
      opts.setTimeout(timeout_);
      std::vector<size_t> bytes;
      for (int64_t c : counts) bytes.push_back(static_cast<size_t>(c) * es);
      opts.setInput(static_cast<char*>(const_cast<void*>(in)), bytes[rank()]);
      opts.setOutput(static_cast<char*>(out), bytes);
      ::gloo::allgatherv(opts);
    }, std::move(done));
  }

  void ReduceScatter(const void* in, void* out, std::vector<int64_t> counts, DataType dtype,
                     CollectiveDone done) override {
    if (absl::Status s = CheckCall("reduce_scatter", counts, dtype); !s.ok()) return Fail(s, std::move(done));
    if (!Summable(dtype)) return Reject("reduce_scatter", Unsupported(dtype), std::move(done));
    Enqueue("reduce_scatter", [=] {
      const int64_t mine = counts[rank()];
      const size_t es = static_cast<size_t>(SizeOf(dtype));
      if (SumCounts(counts) == 0) return;
      // Member k's block of every member's input goes to member k; then member k sums them.
      std::vector<char> gathered(static_cast<size_t>(mine * size()) * es);
      std::vector<int64_t> send_bytes, recv_bytes(size(), mine * static_cast<int64_t>(es));
      for (int64_t c : counts) send_bytes.push_back(c * static_cast<int64_t>(es));
      ::gloo::AlltoallvOptions opts(context_);
      opts.setTag(NextTag());
      opts.setTimeout(timeout_);
      opts.setInput(static_cast<char*>(const_cast<void*>(in)), send_bytes);
      opts.setOutput(gathered.data(), recv_bytes);
      ::gloo::alltoallv(opts);
      const size_t block = static_cast<size_t>(mine) * es;
      std::memcpy(out, gathered.data(), block);
      for (int32_t k = 1; k < size(); ++k) SumInto(out, gathered.data() + k * block, mine, dtype);
    }, std::move(done));
  }

  void Broadcast(void* buffer, int64_t count, DataType dtype, int32_t root, CollectiveDone done) override {
    if (root < 0 || root >= size()) {
      return Reject("broadcast", absl::StrCat("root ", root, " outside the group of ", size()), std::move(done));
    }
    if (count < 0 || SizeOf(dtype) == 0) return Reject("broadcast", "bad count or dtype", std::move(done));
    Enqueue("broadcast", [=] {
      if (count == 0) return;
      ::gloo::BroadcastOptions opts(context_);
      opts.setTag(NextTag());
      opts.setTimeout(timeout_);
      opts.setRoot(root);
      const size_t bytes = static_cast<size_t>(count * SizeOf(dtype));
      if (rank() == root) opts.setInput(static_cast<char*>(buffer), bytes);
      opts.setOutput(static_cast<char*>(buffer), bytes);
      ::gloo::broadcast(opts);
    }, std::move(done));
  }

  void AllToAll(const void* in, std::vector<int64_t> send_counts, void* out, std::vector<int64_t> recv_counts,
                DataType dtype, CollectiveDone done) override {
    absl::Status s = CheckCall("all_to_all", send_counts, dtype);
    if (s.ok()) s = CheckCounts(recv_counts, size(), "all_to_all receive counts");
    if (!s.ok()) return Fail(s, std::move(done));
    Enqueue("all_to_all", [=] {
      if (SumCounts(send_counts) + SumCounts(recv_counts) == 0) return;
      const int64_t es = SizeOf(dtype);
      std::vector<int64_t> sb, rb;
      for (int64_t c : send_counts) sb.push_back(c * es);
      for (int64_t c : recv_counts) rb.push_back(c * es);
      ::gloo::AlltoallvOptions opts(context_);
      opts.setTag(NextTag());
      opts.setTimeout(timeout_);
      opts.setInput(static_cast<char*>(const_cast<void*>(in)), sb);
      opts.setOutput(static_cast<char*>(out), rb);
      ::gloo::alltoallv(opts);
    }, std::move(done));
  }

  void Send(const void* in, int64_t count, DataType dtype, int32_t peer, CollectiveDone done) override {
    PointToPoint("send", const_cast<void*>(in), count, dtype, peer, /*send=*/true, std::move(done));
  }
  void Recv(void* out, int64_t count, DataType dtype, int32_t peer, CollectiveDone done) override {
    PointToPoint("recv", out, count, dtype, peer, /*send=*/false, std::move(done));
  }

  absl::Status Flush() override {
    std::unique_lock<std::mutex> lock(mu_);
    idle_.wait(lock, [&] { return queue_.empty() && !running_; });
    return failure_;
  }

 private:
  static bool Summable(DataType d) {
    return d == DataType::kFloat32 || d == DataType::kFloat64 || d == DataType::kInt32 || d == DataType::kInt64 ||
           d == DataType::kFloat16 || d == DataType::kBFloat16;
  }
  static std::string Unsupported(DataType d) { return absl::StrCat("dtype ", DataTypeName(d), " has no sum here"); }

  using SumFn = void (*)(void*, const void*, const void*, size_t);
  template <typename T>
  static void Reduce(::gloo::AllreduceOptions* opts, const void* in, void* out, int64_t count, SumFn fn) {
    if (in != out) opts->setInput(static_cast<T*>(const_cast<void*>(in)), static_cast<size_t>(count));
    opts->setOutput(static_cast<T*>(out), static_cast<size_t>(count));
    opts->setReduceFunction(fn);
  }

  static void SumInto(void* acc, const void* x, int64_t n, DataType dtype) {
    auto add = [&](auto* a, const auto* b) {
      for (int64_t i = 0; i < n; ++i) a[i] += b[i];
    };
    switch (dtype) {
      case DataType::kFloat32: add(static_cast<float*>(acc), static_cast<const float*>(x)); break;
      case DataType::kFloat64: add(static_cast<double*>(acc), static_cast<const double*>(x)); break;
      case DataType::kInt32: add(static_cast<int32_t*>(acc), static_cast<const int32_t*>(x)); break;
      case DataType::kInt64: add(static_cast<int64_t*>(acc), static_cast<const int64_t*>(x)); break;
      case DataType::kFloat16:
        ::gloo::sum<::gloo::float16>(acc, acc, x, static_cast<size_t>(n));
        break;
      default: SumBf16(acc, acc, x, static_cast<size_t>(n)); break;
    }
  }

  absl::Status CheckCall(const std::string& what, const std::vector<int64_t>& counts, DataType dtype) const {
    RETURN_IF_ERROR(CheckCounts(counts, size(), absl::StrCat(description(), ": ", what)));
    if (SizeOf(dtype) == 0) return absl::InvalidArgumentError(absl::StrCat(description(), ": ", what, ": invalid dtype"));
    return absl::OkStatus();
  }

  void PointToPoint(const char* what, void* ptr, int64_t count, DataType dtype, int32_t peer, bool send,
                    CollectiveDone done) {
    if (peer < 0 || peer >= size() || peer == rank()) {
      return Reject(what, absl::StrCat("peer ", peer, " is not another member of the group of ", size()),
                    std::move(done));
    }
    if (count < 0 || SizeOf(dtype) == 0) return Reject(what, "bad count or dtype", std::move(done));
    // Messages between one pair match in issue order: the n-th send from A to B is the n-th
    // receive at B from A (a slot per channel, direction and sequence, GlooTagSpace).
    const uint64_t sequence = send ? sent_[peer]++ : received_[peer]++;
    Enqueue(what, [=] {
      if (count == 0) return;
      const int32_t from = send ? rank() : peer, to = send ? peer : rank();
      const uint64_t slot = space_.PointToPoint(from, to, sequence);
      auto buffer = context_->createUnboundBuffer(ptr, static_cast<size_t>(count * SizeOf(dtype)));
      if (send) {
        buffer->send(peer, slot);
        if (!buffer->waitSend(timeout_)) throw ::gloo::IoException("send timed out");
      } else {
        buffer->recv(peer, slot);
        if (!buffer->waitRecv(timeout_)) throw ::gloo::IoException("receive timed out");
      }
    }, std::move(done));
  }

  uint32_t NextTag() { return space_.Tag(tag_counter_++); }  // worker thread only

  void Reject(const std::string& what, const std::string& why, CollectiveDone done) {
    Fail(absl::InvalidArgumentError(absl::StrCat(description(), ": ", what, ": ", why)), std::move(done));
  }
  static void Fail(const absl::Status& status, CollectiveDone done) {
    if (done) done(status);
  }

  void Enqueue(const std::string& what, std::function<void()> run, CollectiveDone done) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      queue_.push_back(Call{what, std::move(run), std::move(done)});
    }
    wake_.notify_one();
  }

  void Loop() {
    std::unique_lock<std::mutex> lock(mu_);
    while (true) {
      wake_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping
      Call call = std::move(queue_.front());
      queue_.pop_front();
      running_ = true;
      absl::Status failure = failure_;  // the first failure this channel met: fails every later call
      lock.unlock();
      std::string earlier = "an earlier call failed";
      if (failure.ok() && group_->shared()) {
        failure = group_->failure();
        earlier = "an earlier call failed on the group's shared context";
      }
      absl::Status status;
      if (failure.ok()) {
        try {
          call.run();
        } catch (const std::exception& e) {
          const std::string message = e.what();
          const bool timeout = message.find("imed out") != std::string::npos || message.find("imeout") != std::string::npos;
          const std::string text = absl::StrCat(description(), ": ", call.what, " failed: ", message);
          status = timeout ? absl::DeadlineExceededError(text) : absl::UnavailableError(text);
          group_->Fail(status);  // the context's connections are broken for every channel on it
        }
      } else {
        status = absl::Status(failure.code(),
                              absl::StrCat(description(), ": ", call.what, " not run: ", earlier, ": ", failure.message()));
      }
      if (call.done) call.done(status);
      lock.lock();
      if (failure_.ok()) failure_ = failure.ok() ? status : failure;
      running_ = false;
      if (queue_.empty()) idle_.notify_all();
    }
  }

  const std::shared_ptr<GlooGroupContext> group_;
  const std::shared_ptr<::gloo::Context> context_;
  const std::string tag_;
  const GlooTagSpace space_;
  const std::chrono::milliseconds timeout_;
  uint64_t tag_counter_ = 1;
  std::vector<uint64_t> sent_ = std::vector<uint64_t>(static_cast<size_t>(context_->size), 0);
  std::vector<uint64_t> received_ = std::vector<uint64_t>(static_cast<size_t>(context_->size), 0);
  std::mutex mu_;
  std::condition_variable wake_, idle_;
  std::deque<Call> queue_;
  bool running_ = false, stopping_ = false;
  absl::Status failure_;
  std::thread worker_;  // last: starts after every member above is built
};

}  // namespace

std::unique_ptr<Communicator> MakeGlooChannel(std::shared_ptr<GlooGroupContext> context, std::string tag,
                                              GlooTagSpace space, int64_t timeout_ms) {
  return std::make_unique<GlooCommunicator>(std::move(context), std::move(tag), space, timeout_ms);
}

}  // namespace comm
}  // namespace oneflow_like
