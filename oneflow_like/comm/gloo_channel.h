// Internal to the gloo backend (gloo_collective.h): the communicator, one "channel" of calls run
// in issue order on a worker thread of its own, over a gloo context that is either the channel's
// own or shared by the channels of one group (gloo_collective.cc decides which).
//
// Tags. gloo runs concurrent operations on one context when their slots differ; a collective's
// slot is built from the algorithm (8 bits), a 32-bit tag and 8 bits the algorithm uses itself
// (gloo/types.h), and point-to-point calls name their slot directly. A channel owns a share of
// the tags, GlooTagSpace: with `bits` > 0 the top `bits` of every 32-bit tag are its `slot`
// (derived from the channel id, GlooBackend), the rest counts its collective calls and wraps
// after 2^(32 - bits) calls. Wrapping is safe: every call of a channel involves all its members
// and each member runs the channel's calls one after the other, so no member gets more than a
// few calls ahead of another on one channel, far fewer than 2^(32 - bits).
#ifndef ONEFLOW_LIKE_COMM_GLOO_CHANNEL_H_
#define ONEFLOW_LIKE_COMM_GLOO_CHANNEL_H_

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gloo/context.h"
#include "oneflow_like/comm/collective.h"

namespace oneflow_like {
namespace comm {

// One gloo context (a full TCP mesh over the group) and the first transport failure seen on it.
// gloo itself poisons every pair of a context when one operation times out or a peer's
// connection breaks, so the context is one failure domain: once a call of any channel on it
// failed that way, the later calls of every channel on it fail at once with that status.
class GlooGroupContext {
 public:
  GlooGroupContext(std::shared_ptr<::gloo::Context> context, std::vector<int32_t> group, bool shared)
      : context_(std::move(context)), group_(std::move(group)), shared_(shared) {}

  const std::shared_ptr<::gloo::Context>& context() const { return context_; }
  const std::vector<int32_t>& group() const { return group_; }
  bool shared() const { return shared_; }

  absl::Status failure() const {
    std::lock_guard<std::mutex> lock(mu_);
    return failure_;
  }
  void Fail(const absl::Status& status) {  // the first failure stays
    std::lock_guard<std::mutex> lock(mu_);
    if (failure_.ok()) failure_ = status;
  }

 private:
  const std::shared_ptr<::gloo::Context> context_;
  const std::vector<int32_t> group_;
  const bool shared_;
  mutable std::mutex mu_;
  absl::Status failure_;
};

struct GlooTagSpace {
  static constexpr int kMaxBits = 24;  // point-to-point slots keep 24 bits for the channel
  uint32_t slot = 0;  // < 2^bits
  int bits = 0;       // 0: every tag (a context of its own)

  // The tag of the channel's sequence-th collective call.
  uint32_t Tag(uint64_t sequence) const {
    if (bits == 0) return static_cast<uint32_t>(sequence);
    const uint32_t mask = (uint32_t{1} << (32 - bits)) - 1;
    return (slot << (32 - bits)) | (static_cast<uint32_t>(sequence) & mask);
  }
  // The unbound-buffer slot of the sequence-th message of this channel from group member
  // `from` to `to`: prefix 0x80 (none of gloo's algorithm prefixes, 0x01..0x08), the channel's
  // slot in bits 32..55, the direction in bit 31, the sequence (per pair and direction) below.
  uint64_t PointToPoint(int32_t from, int32_t to, uint64_t sequence) const {
    return (uint64_t{0x80} << 56) | (static_cast<uint64_t>(slot) << 32) | (uint64_t{from < to ? 1u : 0u} << 31) |
           (sequence & 0x7fffffff);
  }
};

// A communicator over `context` (kept alive by it) with the tags of `space`; `tag` names it in
// messages. Calls run on a worker thread of the communicator's own (see gloo_collective.cc for
// why each channel keeps one even on a shared context).
std::unique_ptr<Communicator> MakeGlooChannel(std::shared_ptr<GlooGroupContext> context, std::string tag,
                                              GlooTagSpace space, int64_t timeout_ms);

}  // namespace comm
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_COMM_GLOO_CHANNEL_H_
