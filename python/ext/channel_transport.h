// ChannelHub: several actor::Runtimes of one process share the job's one data transport (the
// Python API keeps an nn.Graph's runtime alive while eager ops run their own small plans).
// Each Runtime gets a Channel: a Transport whose messages carry a 4-byte channel id in front;
// the hub's single receiver on the real transport strips it and hands the message to that
// channel's receiver. Channel ids are allocated in the same order on every process (SPMD), so
// the same id names the same plan everywhere. Register payloads keep their zero-copy path
// (SendRegistered: the id goes into the prefix). Messages for a closed channel (late
// "returned" notices of a finished plan) are dropped.
// Thread-safety: as Transport; Open/Close may run concurrently with deliveries.
#ifndef ONEFLOW_LIKE_PYTHON_EXT_CHANNEL_TRANSPORT_H_
#define ONEFLOW_LIKE_PYTHON_EXT_CHANNEL_TRANSPORT_H_

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "oneflow_like/comm/transport.h"

namespace oneflow_like {
namespace python {

class ChannelHub {
 public:
  explicit ChannelHub(comm::Transport* transport);
  ~ChannelHub();
  // A new channel over the transport (the caller owns it; it must be destroyed before the hub).
  std::unique_ptr<comm::Transport> Open();
  int64_t dropped() const;

 private:
  class Channel;
  void Deliver(Rank from, absl::string_view bytes);
  void SetReceiver(uint32_t id, comm::Transport::Receiver receiver);
  void Close(uint32_t id);

  comm::Transport* transport_;
  mutable std::mutex mu_;
  std::map<uint32_t, std::shared_ptr<comm::Transport::Receiver>> receivers_;
  uint32_t next_id_ = 1;
  int64_t dropped_ = 0;
};

}  // namespace python
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_PYTHON_EXT_CHANNEL_TRANSPORT_H_
