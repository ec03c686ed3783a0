#include "oneflow_like/compiler/plan/plan_hash.h"

#include <algorithm>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace oneflow_like {
namespace compiler {

std::string DeterministicBytes(const google::protobuf::MessageLite& message) {
  std::string bytes(message.ByteSizeLong(), '\0');
  {
    google::protobuf::io::ArrayOutputStream stream(bytes.data(), static_cast<int>(bytes.size()));
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    message.SerializeWithCachedSizes(&coded);
  }
  return bytes;
}

namespace {

constexpr uint64_t kFnvOffsetBasis = 0xcbf29ce484222325ULL;

uint64_t Fnv1a64Continue(uint64_t hash, absl::string_view bytes) {
  const unsigned char* p = reinterpret_cast<const unsigned char*>(bytes.data());
  const unsigned char* end = p + bytes.size();
  for (; p != end; ++p) hash = (hash ^ *p) * 0x100000001b3ULL;
  return hash;
}

// Feeds the bytes written through it to FNV-1a-64 chunk by chunk: the serialization is hashed
// as it is produced, never held in memory whole.
class HashingStream : public google::protobuf::io::ZeroCopyOutputStream {
 public:
  explicit HashingStream(uint64_t hash) : hash_(hash) {}
  bool Next(void** data, int* size) override {
    Consume();
    *data = buffer_;
    *size = kChunk;
    pending_ = kChunk;
    return true;
  }
  void BackUp(int count) override { pending_ -= count; }
  int64_t ByteCount() const override { return consumed_ + pending_; }
  // Hashes what was written so far; call after the writer is done (destroyed).
  uint64_t Finish() {
    Consume();
    return hash_;
  }

 private:
  static constexpr int kChunk = 1 << 16;
  void Consume() {
    hash_ = Fnv1a64Continue(hash_, absl::string_view(buffer_, static_cast<size_t>(pending_)));
    consumed_ += pending_;
    pending_ = 0;
  }

  char buffer_[kChunk];
  int pending_ = 0;  // bytes of buffer_ handed out and not backed up
  int64_t consumed_ = 0;
  uint64_t hash_;
};

// Continues `hash` over the deterministic serialization of `message`. `sizes_cached`: its
// ByteSizeLong() was just computed (no other change since), so it is not walked again for sizes.
uint64_t HashMessage(uint64_t hash, const google::protobuf::MessageLite& message,
                     bool sizes_cached = false) {
  auto stream = std::make_unique<HashingStream>(hash);  // 64 KiB: off the stack
  {
    google::protobuf::io::CodedOutputStream coded(stream.get());
    coded.SetSerializationDeterministic(true);
    if (sizes_cached) {
      message.SerializeWithCachedSizes(&coded);
    } else {
      message.SerializePartialToCodedStream(&coded);
    }
  }  // the CodedOutputStream backs up its unused bytes when destroyed
  return stream->Finish();
}


// The bytes that frame one element of a repeated message field (< 16) inside PlanProto: its tag
// (wire type 2, length-delimited) and the length as a varint.
std::string FieldFrame(int field, size_t length) {
  std::string frame(1, static_cast<char>((field << 3) | 2));
  uint64_t value = length;
  while (value >= 0x80) {
    frame.push_back(static_cast<char>((value & 0x7f) | 0x80));
    value >>= 7;
  }
  frame.push_back(static_cast<char>(value));
  return frame;
}

// FNV-1a-64 of the deterministic serialization of `plan` with content_hash empty, without
// building that serialization: a PlanProto serializes its fields in field-number order, so
// the bytes are those of the fields before rank_plans (1-3), then every rank plan framed as
// field 4, then the fields after it (5-7, 9-10; content_hash, 8, is left out). The rank plans are
// serialized on up to `workers` threads (a bounded window ahead of the hashing, which stays in
// plan order), so the hash does not depend on the number of threads.
uint64_t HashPlanInParts(const PlanProto& plan, int workers) {
  PlanProto head;
  head.set_job_name(plan.job_name());
  head.set_world_size(plan.world_size());
  *head.mutable_ranks() = plan.ranks();
  // The fields after the rank plans: 5, then every SBP decision framed as field 6 (not copied:
  // at 16384 ranks they are the plan's largest part), then 7, 9, 10.
  PlanProto tail;
  tail.set_pieces_per_step(plan.pieces_per_step());
  PlanProto after;
  *after.mutable_memory() = plan.memory();
  *after.mutable_boxing_choices() = plan.boxing_choices();
  if (plan.has_per_rank()) *after.mutable_per_rank() = plan.per_rank();
  auto hash_tail = [&](uint64_t hash) {
    hash = HashMessage(hash, tail);
    for (const OpSbpDecisionProto& d : plan.sbp_decisions()) {
      hash = Fnv1a64Continue(hash, FieldFrame(6, d.ByteSizeLong()));
      hash = HashMessage(hash, d, /*sizes_cached=*/true);
    }
    return HashMessage(hash, after);
  };

  uint64_t hash = HashMessage(kFnvOffsetBasis, head);
  const int n = plan.rank_plans_size();
  if (workers <= 1) {  // streamed: no buffer per rank plan
    for (const RankPlanProto& rank_plan : plan.rank_plans()) {
      hash = Fnv1a64Continue(hash, FieldFrame(4, rank_plan.ByteSizeLong()));
      hash = HashMessage(hash, rank_plan, /*sizes_cached=*/true);
    }
    return hash_tail(hash);
  }
  const int window = 4 * workers;  // rank plans serialized ahead of the hash, at most
  std::vector<std::string> bytes(n);
  std::vector<char> done(n, 0);
  std::mutex mutex;
  std::condition_variable changed;
  int next = 0;    // the next rank plan to serialize (guarded by mutex)
  int hashed = 0;  // rank plans hashed so far (guarded by mutex)
  // Serializes claimed rank plans until none is left; stops early when `until` says so.
  auto work = [&](std::unique_lock<std::mutex>& lock, auto until) {
    while (!until() && next < n) {
      if (next >= hashed + window) {
        changed.wait(lock);
        continue;
      }
      const int i = next++;
      lock.unlock();
      std::string serialized = DeterministicBytes(plan.rank_plans(i));
      lock.lock();
      bytes[i] = std::move(serialized);
      done[i] = 1;
      changed.notify_all();
    }
  };
  std::vector<std::thread> helpers;
  for (int w = 1; w < workers; ++w) {
    helpers.emplace_back([&] {
      std::unique_lock<std::mutex> lock(mutex);
      work(lock, [] { return false; });
    });
  }
  for (int i = 0; i < n; ++i) {
    std::string serialized;
    {
      std::unique_lock<std::mutex> lock(mutex);
      work(lock, [&] { return done[i] != 0; });  // help until rank plan i is ready
      changed.wait(lock, [&] { return done[i] != 0; });
      serialized = std::move(bytes[i]);
      bytes[i] = std::string();
    }
    hash = Fnv1a64Continue(hash, FieldFrame(4, serialized.size()));
    hash = Fnv1a64Continue(hash, serialized);
    {
      std::lock_guard<std::mutex> lock(mutex);
      hashed = i + 1;
    }
    changed.notify_all();
  }
  for (std::thread& helper : helpers) helper.join();
  return hash_tail(hash);
}

}  // namespace

uint64_t Fnv1a64(absl::string_view bytes) { return Fnv1a64Continue(kFnvOffsetBasis, bytes); }

std::string PlanContentHash(const PlanProto& plan) {
  const bool no_unknown_fields = plan.GetReflection()->GetUnknownFields(plan).empty();
  uint64_t hash;
  if (no_unknown_fields) {
    const int cores = static_cast<int>(std::thread::hardware_concurrency());
    const int workers = std::max(1, std::min({cores, 4, plan.rank_plans_size() / 8}));
    hash = HashPlanInParts(plan, workers);
  } else if (plan.content_hash().empty()) {
    hash = HashMessage(kFnvOffsetBasis, plan);
  } else {
    PlanProto copy = plan;  // rare: a sealed plan with unknown fields
    copy.clear_content_hash();
    hash = HashMessage(kFnvOffsetBasis, copy);
  }
  return absl::StrFormat("fnv1a64:%016x", hash);
}

StreamedPlanHash::StreamedPlanHash(const PlanProto& head) {
  PlanProto fields;
  fields.set_job_name(head.job_name());
  fields.set_world_size(head.world_size());
  *fields.mutable_ranks() = head.ranks();
  hash_ = HashMessage(kFnvOffsetBasis, fields);
}

void StreamedPlanHash::AddRankPlan(absl::string_view serialized) {
  hash_ = Fnv1a64Continue(hash_, FieldFrame(4, serialized.size()));
  hash_ = Fnv1a64Continue(hash_, serialized);
}

void StreamedPlanHash::AddFields(const PlanProto& fields) { hash_ = HashMessage(hash_, fields); }

void StreamedPlanHash::AddElement(int field, const google::protobuf::MessageLite& element) {
  hash_ = Fnv1a64Continue(hash_, FieldFrame(field, element.ByteSizeLong()));
  hash_ = HashMessage(hash_, element, /*sizes_cached=*/true);
}

std::string StreamedPlanHash::Finish(const PlanProto& tail) {
  return absl::StrFormat("fnv1a64:%016x", HashMessage(hash_, tail));
}

void SealPlan(PlanProto* plan) {
  plan->clear_content_hash();
  plan->set_content_hash(PlanContentHash(*plan));
}

absl::Status CheckPlanHash(const PlanProto& plan) {
  const std::string computed = PlanContentHash(plan);
  if (plan.content_hash() == computed) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("CheckPlanHash: plan '", plan.job_name(), "' stores content_hash \"",
                   plan.content_hash(), "\" but its content hashes to \"", computed,
                   "\"; the plan is corrupted, was edited after SealPlan, or was never sealed"));
}

}  // namespace compiler
}  // namespace oneflow_like
