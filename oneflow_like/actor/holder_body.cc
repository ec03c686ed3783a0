#include "oneflow_like/actor/holder_body.h"

namespace oneflow_like {
namespace actor {

bool HolderDeviceBody::NothingToCopy(const ActIo& io) {
  for (size_t i = 0; i < io.inputs.size(); ++i) {
    if (io.inputs[i].byte_size() == 0) continue;
    if (i >= io.outputs.size() || io.inputs[i].raw_data() != io.outputs[i].raw_data()) return false;
  }
  return true;
}

void HolderDeviceBody::Start(ActIo io, std::function<void(const absl::Status&)> finished) {
  if (NothingToCopy(io)) return finished(absl::OkStatus());
  copy_->Start(std::move(io), std::move(finished));
}

}  // namespace actor
}  // namespace oneflow_like
