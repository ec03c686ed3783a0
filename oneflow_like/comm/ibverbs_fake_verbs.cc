// A small in-process imitation of the libibverbs calls IbverbsTransport makes, linked (statically,
// so its definitions win over libibverbs') into ibverbs_transport_fake_test only. It lets the
// transport's data path, credits, completion thread and error paths run on machines without an
// RDMA device. It is a test double, not an emulator: one device "fake0", one active port, RC QPs
// of this process addressed by qp_num, RDMA WRITE WITH IMMEDIATE and RDMA READ (performed at
// once from memory registered with REMOTE_READ, bounds-checked; else a remote access error). A write is performed
// when the destination QP is at least RTR and has a posted receive (until then it waits in order,
// like an RC retry/RNR wait): the bytes are copied into the registered memory named by the rkey
// (checked against bounds and REMOTE_WRITE access), a receive completion with the immediate goes
// to the destination and a send completion to the source. A write to a QP that no longer exists,
// or with a bad rkey, completes with an error, like retries running out or a remote access error.
// It also enforces the queue capacities the transport asked for (ENOMEM when exceeded), so the
// transport's own accounting is checked. State is process-global (the C API has no handle for
// it) and guarded by one mutex.
#include <infiniband/verbs.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>

#undef ibv_query_port
#undef ibv_reg_mr

namespace {

struct FakeCq {
  ibv_cq cq{};
  std::deque<ibv_wc> completions;
  bool armed = false;
};
struct FakeQp {
  ibv_qp qp{};
  uint32_t max_send = 0, max_receive = 0;
  uint32_t sends_in_flight = 0;  // posted, completion not yet polled
  std::deque<uint64_t> receives;  // posted receive wr_ids
  uint32_t dest_qp_num = 0;
  std::deque<ibv_send_wr> waiting;  // posted to this QP by its peer, not yet performed
  std::deque<ibv_sge> waiting_sge;  // their (single) gather entries
  std::deque<FakeQp*> waiting_from;
};
struct State {
  std::mutex mu;
  ibv_device device{};
  std::map<uint32_t, FakeQp*> qps;  // by qp_num
  std::map<uint32_t, ibv_mr*> mrs;       // remote-writable, by key (lkey == rkey)
  std::map<uint32_t, ibv_mr*> readable;  // remote-readable, by key
  uint32_t next_qp_num = 0x100, next_key = 0x1000;
};
State& state() {
  static State* s = new State;  // test double only: the C API gives no handle to hang it on
  return *s;
}

void AddCompletion(ibv_cq* cq, const ibv_wc& wc) {
  FakeCq* fake = reinterpret_cast<FakeCq*>(cq);
  fake->completions.push_back(wc);
  if (fake->armed && cq->channel != nullptr) {
    fake->armed = false;
    const uint64_t one = 1;
    (void)!write(cq->channel->fd, &one, sizeof(one));
  }
}

// Performs the writes waiting at `dest` while it can take them. REQUIRES: state().mu held.
void Progress(FakeQp* dest) {
  while (!dest->waiting.empty() && dest->qp.state >= IBV_QPS_RTR && dest->qp.state <= IBV_QPS_RTS &&
         !dest->receives.empty()) {
    ibv_send_wr wr = dest->waiting.front();
    ibv_sge sge = dest->waiting_sge.front();
    FakeQp* source = dest->waiting_from.front();
    dest->waiting.pop_front();
    dest->waiting_sge.pop_front();
    dest->waiting_from.pop_front();
    ibv_wc sent{};
    sent.wr_id = wr.wr_id;
    sent.opcode = IBV_WC_RDMA_WRITE;
    sent.qp_num = source->qp.qp_num;
    auto mr = state().mrs.find(wr.wr.rdma.rkey);
    const size_t length = wr.num_sge > 0 ? sge.length : 0;
    if (length > 0) {
      const bool ok = mr != state().mrs.end() && mr->second->pd == dest->qp.pd &&
                      wr.wr.rdma.remote_addr >= reinterpret_cast<uint64_t>(mr->second->addr) &&
                      wr.wr.rdma.remote_addr + length <= reinterpret_cast<uint64_t>(mr->second->addr) + mr->second->length;
      if (!ok) {
        sent.status = IBV_WC_REM_ACCESS_ERR;
        AddCompletion(source->qp.send_cq, sent);
        continue;
      }
      std::memcpy(reinterpret_cast<void*>(wr.wr.rdma.remote_addr), reinterpret_cast<void*>(sge.addr), length);
    }
    ibv_wc received{};
    received.wr_id = dest->receives.front();
    dest->receives.pop_front();
    received.status = IBV_WC_SUCCESS;
    received.opcode = IBV_WC_RECV_RDMA_WITH_IMM;
    received.byte_len = length;
    received.imm_data = wr.imm_data;
    received.wc_flags = IBV_WC_WITH_IMM;
    received.qp_num = dest->qp.qp_num;
    AddCompletion(dest->qp.recv_cq, received);
    sent.status = IBV_WC_SUCCESS;
    AddCompletion(source->qp.send_cq, sent);
  }
}

int PollCq(ibv_cq* cq, int n, ibv_wc* out) {
  std::lock_guard<std::mutex> lock(state().mu);
  FakeCq* fake = reinterpret_cast<FakeCq*>(cq);
  int count = 0;
  for (; count < n && !fake->completions.empty(); ++count) {
    out[count] = fake->completions.front();
    fake->completions.pop_front();
    auto qp = state().qps.find(out[count].qp_num);
    const bool send = out[count].opcode == IBV_WC_RDMA_WRITE || out[count].opcode == IBV_WC_RDMA_READ;
    if (send && qp != state().qps.end()) --qp->second->sends_in_flight;
  }
  return count;
}

int ReqNotifyCq(ibv_cq* cq, int) {
  std::lock_guard<std::mutex> lock(state().mu);
  reinterpret_cast<FakeCq*>(cq)->armed = true;
  return 0;
}

int PostSend(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad) {
  std::lock_guard<std::mutex> lock(state().mu);
  FakeQp* source = reinterpret_cast<FakeQp*>(qp);
  for (; wr != nullptr; wr = wr->next) {
    *bad = wr;
    const bool read = wr->opcode == IBV_WR_RDMA_READ;
    if (qp->state != IBV_QPS_RTS || (wr->opcode != IBV_WR_RDMA_WRITE_WITH_IMM && !read) || wr->num_sge > 1 ||
        (read && wr->num_sge != 1))
      return EINVAL;
    if (source->sends_in_flight >= source->max_send) return ENOMEM;  // the send queue is full
    ++source->sends_in_flight;
    if (read) {  // performed at once: reads need no receive at the target
      ibv_wc done{};
      done.wr_id = wr->wr_id;
      done.opcode = IBV_WC_RDMA_READ;
      done.qp_num = qp->qp_num;
      auto mr = state().readable.find(wr->wr.rdma.rkey);
      const ibv_sge& sge = wr->sg_list[0];
      const bool ok = state().qps.count(source->dest_qp_num) > 0 && mr != state().readable.end() &&
                      wr->wr.rdma.remote_addr >= reinterpret_cast<uint64_t>(mr->second->addr) &&
                      wr->wr.rdma.remote_addr + sge.length <=
                          reinterpret_cast<uint64_t>(mr->second->addr) + mr->second->length;
      done.status = ok ? IBV_WC_SUCCESS : IBV_WC_REM_ACCESS_ERR;
      done.byte_len = ok ? sge.length : 0;
      if (ok) std::memcpy(reinterpret_cast<void*>(sge.addr), reinterpret_cast<void*>(wr->wr.rdma.remote_addr), sge.length);
      AddCompletion(qp->send_cq, done);
      continue;
    }
    auto dest = state().qps.find(source->dest_qp_num);
    if (dest == state().qps.end()) {  // the peer is gone: retries would run out
      ibv_wc failed{};
      failed.wr_id = wr->wr_id;
      failed.status = IBV_WC_RETRY_EXC_ERR;
      failed.opcode = IBV_WC_RDMA_WRITE;
      failed.qp_num = qp->qp_num;
      AddCompletion(qp->send_cq, failed);
      continue;
    }
    dest->second->waiting.push_back(*wr);
    dest->second->waiting_sge.push_back(wr->num_sge > 0 ? wr->sg_list[0] : ibv_sge{});
    dest->second->waiting_from.push_back(source);
    Progress(dest->second);
  }
  *bad = nullptr;
  return 0;
}

int PostRecv(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad) {
  std::lock_guard<std::mutex> lock(state().mu);
  FakeQp* fake = reinterpret_cast<FakeQp*>(qp);
  for (; wr != nullptr; wr = wr->next) {
    *bad = wr;
    if (fake->receives.size() >= fake->max_receive) return ENOMEM;  // the receive queue is full
    fake->receives.push_back(wr->wr_id);
  }
  *bad = nullptr;
  Progress(fake);
  return 0;
}

}  // namespace

extern "C" {

ibv_device** ibv_get_device_list(int* count) {
  *count = 1;
  return new ibv_device* [2] { &state().device, nullptr };
}
void ibv_free_device_list(ibv_device** list) { delete[] list; }
const char* ibv_get_device_name(ibv_device*) { return "fake0"; }

ibv_context* ibv_open_device(ibv_device* device) {
  ibv_context* context = new ibv_context{};
  context->device = device;
  context->ops.poll_cq = PollCq;
  context->ops.req_notify_cq = ReqNotifyCq;
  context->ops.post_send = PostSend;
  context->ops.post_recv = PostRecv;
  return context;
}
int ibv_close_device(ibv_context* context) {
  delete context;
  return 0;
}

int ibv_query_port(ibv_context*, uint8_t port_num, _compat_ibv_port_attr* compat) {
  if (port_num != 1) return EINVAL;
  ibv_port_attr* port = reinterpret_cast<ibv_port_attr*>(compat);
  port->state = IBV_PORT_ACTIVE;
  port->active_mtu = IBV_MTU_4096;
  port->lid = 7;
  port->link_layer = IBV_LINK_LAYER_INFINIBAND;
  return 0;
}
int ibv_query_gid(ibv_context*, uint8_t, int index, ibv_gid* gid) {
  if (index != 0) return errno = EINVAL, -1;
  std::memset(gid, 0, sizeof(*gid));
  gid->raw[15] = 1;
  return 0;
}

ibv_pd* ibv_alloc_pd(ibv_context* context) { return new ibv_pd{context, 0}; }
int ibv_dealloc_pd(ibv_pd* pd) {
  delete pd;
  return 0;
}

ibv_comp_channel* ibv_create_comp_channel(ibv_context* context) {
  return new ibv_comp_channel{context, eventfd(0, 0), 0};
}
int ibv_destroy_comp_channel(ibv_comp_channel* channel) {
  close(channel->fd);
  delete channel;
  return 0;
}

ibv_cq* ibv_create_cq(ibv_context* context, int cqe, void* cq_context, ibv_comp_channel* channel, int) {
  FakeCq* fake = new FakeCq;
  fake->cq.context = context;
  fake->cq.channel = channel;
  fake->cq.cq_context = cq_context;
  fake->cq.cqe = cqe;
  return &fake->cq;
}
int ibv_destroy_cq(ibv_cq* cq) {
  delete reinterpret_cast<FakeCq*>(cq);
  return 0;
}
int ibv_get_cq_event(ibv_comp_channel* channel, ibv_cq** cq, void** cq_context) {
  uint64_t value = 0;
  if (read(channel->fd, &value, sizeof(value)) != sizeof(value)) return -1;
  *cq = nullptr;  // the transport only acks the event; one CQ per channel
  *cq_context = nullptr;
  return 0;
}
void ibv_ack_cq_events(ibv_cq*, unsigned int) {}

ibv_mr* ibv_reg_mr(ibv_pd* pd, void* addr, size_t length, int access) {
  std::lock_guard<std::mutex> lock(state().mu);
  const uint32_t key = state().next_key++;
  ibv_mr* mr = new ibv_mr{pd->context, pd, addr, length, 0, key, key};
  if (access & IBV_ACCESS_REMOTE_WRITE) state().mrs[key] = mr;  // only remote-writable keys are found
  if (access & IBV_ACCESS_REMOTE_READ) state().readable[key] = mr;
  return mr;
}
int ibv_dereg_mr(ibv_mr* mr) {
  std::lock_guard<std::mutex> lock(state().mu);
  state().mrs.erase(mr->rkey);
  state().readable.erase(mr->rkey);
  delete mr;
  return 0;
}

ibv_qp* ibv_create_qp(ibv_pd* pd, ibv_qp_init_attr* init) {
  std::lock_guard<std::mutex> lock(state().mu);
  if (init->qp_type != IBV_QPT_RC) return errno = EINVAL, nullptr;
  FakeQp* fake = new FakeQp;
  fake->qp.context = pd->context;
  fake->qp.pd = pd;
  fake->qp.send_cq = init->send_cq;
  fake->qp.recv_cq = init->recv_cq;
  fake->qp.qp_num = state().next_qp_num++;
  fake->qp.state = IBV_QPS_RESET;
  fake->qp.qp_type = IBV_QPT_RC;
  fake->max_send = init->cap.max_send_wr;
  fake->max_receive = init->cap.max_recv_wr;
  state().qps[fake->qp.qp_num] = fake;
  return &fake->qp;
}
int ibv_destroy_qp(ibv_qp* qp) {
  std::lock_guard<std::mutex> lock(state().mu);
  state().qps.erase(qp->qp_num);
  for (auto& entry : state().qps) {  // writes it posted and that wait at a peer die with it
    FakeQp* other = entry.second;
    for (size_t i = 0; i < other->waiting.size();) {
      if (other->waiting_from[i] == reinterpret_cast<FakeQp*>(qp)) {
        other->waiting.erase(other->waiting.begin() + i);
        other->waiting_sge.erase(other->waiting_sge.begin() + i);
        other->waiting_from.erase(other->waiting_from.begin() + i);
      } else {
        ++i;
      }
    }
  }
  delete reinterpret_cast<FakeQp*>(qp);
  return 0;
}
int ibv_modify_qp(ibv_qp* qp, ibv_qp_attr* attr, int mask) {
  std::lock_guard<std::mutex> lock(state().mu);
  FakeQp* fake = reinterpret_cast<FakeQp*>(qp);
  if (!(mask & IBV_QP_STATE)) return EINVAL;
  const ibv_qp_state from = qp->state, to = attr->qp_state;
  const bool legal = (from == IBV_QPS_RESET && to == IBV_QPS_INIT) || (from == IBV_QPS_INIT && to == IBV_QPS_RTR) ||
                     (from == IBV_QPS_RTR && to == IBV_QPS_RTS);
  if (!legal) return EINVAL;
  if (to == IBV_QPS_RTR) {
    if (!(mask & IBV_QP_DEST_QPN) || !(mask & IBV_QP_PATH_MTU) || !(mask & IBV_QP_AV)) return EINVAL;
    fake->dest_qp_num = attr->dest_qp_num;
  }
  qp->state = to;
  Progress(fake);
  return 0;
}

}  // extern "C"
