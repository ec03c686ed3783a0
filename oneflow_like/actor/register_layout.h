// RegisterLayout: where the `count` buffers of one register live and what each slot holds.
// Built by the runtime from a RegisterProto (planned memory) or for a remote mirror (staging
// memory the runtime allocates to receive payloads). Immutable after construction; the memory
// it points to is owned by the runtime and outlives every actor.
//
//   layout.View(/*buffer=*/1, /*slot=*/0)   // a borrowed Tensor over buffer 1, slot 0
#ifndef ONEFLOW_LIKE_ACTOR_REGISTER_LAYOUT_H_
#define ONEFLOW_LIKE_ACTOR_REGISTER_LAYOUT_H_

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "oneflow_like/core/ids.h"
#include "oneflow_like/core/status.h"
#include "oneflow_like/core/tensor.h"

namespace oneflow_like {
namespace actor {

struct RegisterLayout {
  RegisterId id;
  std::string name;
  int32_t count = 1;
  std::vector<TensorDesc> slots;      // empty: a control-only register
  std::vector<char*> buffers;         // per buffer: base address (empty for control-only)
  std::vector<int64_t> slot_offsets;  // per slot: byte offset inside a buffer

  Tensor View(int32_t buffer, int32_t slot) const {
    return Tensor::Borrow(slots[slot], buffers[buffer] + slot_offsets[slot]);
  }
  int64_t payload_bytes() const {
    int64_t total = 0;
    for (const TensorDesc& d : slots) total += d.byte_size();
    return total;
  }
  // Views of the slots of one buffer, in slot order (a remote "ready" carries them packed one
  // after another; Unpack is the inverse).
  std::vector<absl::string_view> PayloadParts(int32_t buffer) const {
    std::vector<absl::string_view> parts;
    for (size_t s = 0; s < slots.size(); ++s) {
      parts.emplace_back(buffers[buffer] + slot_offsets[s], static_cast<size_t>(slots[s].byte_size()));
    }
    return parts;
  }
  absl::Status Unpack(int32_t buffer, absl::string_view bytes) const {
    if (buffer < 0 || buffer >= count) {
      return absl::InvalidArgumentError(
          absl::StrCat("register '", name, "' (id ", id.value(), ") has no buffer ", buffer, " (count ", count, ")"));
    }
    if (static_cast<int64_t>(bytes.size()) != payload_bytes()) {
      return absl::InvalidArgumentError(absl::StrCat("payload for register '", name, "' (id ", id.value(), ") has ",
                                                     bytes.size(), " bytes, expected ", payload_bytes()));
    }
    size_t pos = 0;
    for (size_t s = 0; s < slots.size(); ++s) {
      std::memcpy(buffers[buffer] + slot_offsets[s], bytes.data() + pos, slots[s].byte_size());
      pos += slots[s].byte_size();
    }
    return absl::OkStatus();
  }
};

}  // namespace actor
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_ACTOR_REGISTER_LAYOUT_H_
