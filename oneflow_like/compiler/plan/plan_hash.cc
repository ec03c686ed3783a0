#include "oneflow_like/compiler/plan/plan_hash.h"

#include <memory>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace oneflow_like {
namespace compiler {
namespace {

// Feeds the bytes written through it to FNV-1a-64 chunk by chunk: the serialization is hashed
// as it is produced, never held in memory whole.
class HashingStream : public google::protobuf::io::ZeroCopyOutputStream {
 public:
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
  static uint64_t Fnv1a64Continue(uint64_t hash, absl::string_view bytes) {
    const unsigned char* p = reinterpret_cast<const unsigned char*>(bytes.data());
    const unsigned char* end = p + bytes.size();
    for (; p != end; ++p) hash = (hash ^ *p) * 0x100000001b3ULL;
    return hash;
  }

  char buffer_[kChunk];
  int pending_ = 0;  // bytes of buffer_ handed out and not backed up
  int64_t consumed_ = 0;
  uint64_t hash_ = 0xcbf29ce484222325ULL;
};

// FNV-1a-64 of the deterministic serialization of `plan`.
uint64_t HashDeterministicBytes(const PlanProto& plan) {
  auto stream = std::make_unique<HashingStream>();  // 64 KiB: off the stack
  {
    google::protobuf::io::CodedOutputStream coded(stream.get());
    coded.SetSerializationDeterministic(true);
    plan.SerializeToCodedStream(&coded);
  }  // the CodedOutputStream backs up its unused bytes when destroyed
  return stream->Finish();
}

}  // namespace

uint64_t Fnv1a64(absl::string_view bytes) {
  uint64_t hash = 0xcbf29ce484222325ULL;
  const unsigned char* p = reinterpret_cast<const unsigned char*>(bytes.data());
  const unsigned char* end = p + bytes.size();
  for (; p != end; ++p) hash = (hash ^ *p) * 0x100000001b3ULL;
  return hash;
}

std::string PlanContentHash(const PlanProto& plan) {
  uint64_t hash;
  if (plan.content_hash().empty()) {
    hash = HashDeterministicBytes(plan);
  } else {
    PlanProto copy = plan;  // only a sealed plan pays for the copy
    copy.clear_content_hash();
    hash = HashDeterministicBytes(copy);
  }
  return absl::StrFormat("fnv1a64:%016x", hash);
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
