// Mailbox: the message queue of one runtime thread. Any thread may Push (multi-producer); only
// the owner thread pops (single consumer). Messages are trivially copyable values.
//
//   Mailbox box;
//   box.Push(message);                        // any thread
//   std::vector<ActorMessage> batch;
//   box.PopAll(&batch);                       // owner: blocks until at least one message
#ifndef ONEFLOW_LIKE_ACTOR_MAILBOX_H_
#define ONEFLOW_LIKE_ACTOR_MAILBOX_H_

#include <condition_variable>
#include <mutex>
#include <vector>

#include "oneflow_like/actor/message.h"

namespace oneflow_like {
namespace actor {

class Mailbox {
 public:
  // Thread-safe.
  void Push(const ActorMessage& message) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      queue_.push_back(message);
    }
    cv_.notify_one();
  }
  // Owner thread only: blocks until the queue is non-empty, then moves all messages (in push
  // order) into *batch (which is cleared first).
  void PopAll(std::vector<ActorMessage>* batch) {
    batch->clear();
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return !queue_.empty(); });
    batch->swap(queue_);
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<ActorMessage> queue_;
};

}  // namespace actor
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_ACTOR_MAILBOX_H_
