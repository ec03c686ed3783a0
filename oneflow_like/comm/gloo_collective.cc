#include "oneflow_like/comm/gloo_collective.h"

#include <arpa/inet.h>

#include <algorithm>
#include <chrono>
#include <exception>
#include <future>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gloo/common/error.h"
#include "gloo/rendezvous/context.h"
#include "gloo/rendezvous/prefix_store.h"
#include "gloo/rendezvous/store.h"
#include "gloo/transport/tcp/device.h"
#include "oneflow_like/comm/gloo_channel.h"
#include "oneflow_like/comm/gloo_ol_transport.h"
#include "oneflow_like/core/status.h"

namespace oneflow_like {
namespace comm {
namespace {

// Where rank 0 shares the ol transport's job token when GlooOptions::job_token is empty.
constexpr char kOlTokenKey[] = "gloo-ol/job_token";

// gloo's Store over ours (gloo calls it only while connecting, on the connecting thread).
class StoreAdapter final : public ::gloo::rendezvous::Store {
 public:
  StoreAdapter(RendezvousStore* store, int64_t timeout_ms) : store_(store), timeout_ms_(timeout_ms) {}
  void set(const std::string& key, const std::vector<char>& data) override {
    absl::Status s = store_->Set(key, std::string(data.begin(), data.end()));
    if (!s.ok()) throw ::gloo::IoException(std::string(s.message()));
  }
  std::vector<char> get(const std::string& key) override {
    absl::StatusOr<std::string> v = store_->Get(key, timeout_ms_);
    if (!v.ok()) throw ::gloo::IoException(std::string(v.status().message()));
    return std::vector<char>(v->begin(), v->end());
  }
  void wait(const std::vector<std::string>& keys) override { wait(keys, std::chrono::milliseconds(timeout_ms_)); }
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override {
    for (const std::string& key : keys) {
      absl::StatusOr<std::string> v = store_->Get(key, timeout.count());
      if (!v.ok()) throw ::gloo::IoException(std::string(v.status().message()));
    }
  }

 private:
  RendezvousStore* store_;
  int64_t timeout_ms_;
};

// ConnectChannel: one shared context per group, channels in tag spaces of it.
//
// A channel's tag space (GlooTagSpace) is its id modulo 2^GlooOptions::channel_bits. Member 0 of
// the group decides, in the order its own channels of the group connect: a channel whose tag
// space no earlier channel of the group holds takes it and shares the group's context; a channel
// whose tag space is taken (ids equal modulo 2^channel_bits) falls back to a context of its own,
// as Connect gives. Member 0 publishes each decision in the rendezvous store and the others follow
// it, so a channel is on the same context on every member whatever order each member's channels
// connect in (a rule each member applied alone would depend on that order).
//
// Each channel keeps a worker thread of its own, also on a shared context. One worker per group
// would run the group's calls in one order per member, but the members issue the calls of
// different channels in different orders (the runtime's actors fire as their inputs arrive, with
// micro-batches interleaved): member 0 could block in channel A's call while member 1 blocks in
// channel B's, each waiting for the other, until the timeout. With a worker per channel the
// channels stay as independent as separate contexts made them; only the connections are shared.
//
// The group's context is connected by the first ConnectChannel of the group on each member,
// before the decision: every member calls ConnectChannel at least once per group, so the
// members meet there even if each connects its channels one after the other in a different
// order. It lives as long as the backend (or its last channel); channel ids are never reused.
class GlooBackend final : public CollectiveBackend {
 public:
  // `device`: gloo's TCP device, or null for ours (made at the first connect: it may wait for
  // the job token in the store).
  GlooBackend(RendezvousStore* store, int32_t rank, int32_t world, GlooOptions options,
              std::shared_ptr<::gloo::transport::Device> device)
      : store_(store), rank_(rank), world_(world), options_(std::move(options)), device_(std::move(device)) {}
  std::string name() const override { return "gloo"; }

  absl::StatusOr<std::unique_ptr<Communicator>> Connect(const std::vector<int32_t>& group,
                                                        const std::string& tag) override {
    ASSIGN_OR_RETURN(const int32_t me, Member(group, absl::StrCat("(tag '", tag, "')")));
    ASSIGN_OR_RETURN(std::shared_ptr<::gloo::Context> context,
                     ConnectContext(absl::StrCat("gloo/", tag, "/", absl::StrJoin(group, ",")), group, me,
                                    absl::StrCat("(tag '", tag, "')")));
    auto own = std::make_shared<GlooGroupContext>(std::move(context), group, /*shared=*/false);
    return Channel(std::move(own), tag, GlooTagSpace{});
  }

  absl::StatusOr<std::unique_ptr<Communicator>> ConnectChannel(const std::vector<int32_t>& group, uint64_t channel,
                                                               const std::string& tag) override {
    if (!options_.share_group_contexts) return Connect(group, tag);
    const std::string what = absl::StrCat("(channel ", channel, ", tag '", tag, "')");
    ASSIGN_OR_RETURN(const int32_t me, Member(group, what));
    std::shared_ptr<GroupState> state;
    bool connects = false;  // this call connects the group's context
    {
      std::lock_guard<std::mutex> lock(mu_);
      std::shared_ptr<GroupState>& g = groups_[group];
      if (g == nullptr) g = std::make_shared<GroupState>();
      state = g;
      if (!state->channels.insert(channel).second) {
        return absl::InvalidArgumentError(absl::StrCat("gloo: channel ", channel, " of group [",
                                                       absl::StrJoin(group, ","), "] is already connected on rank ",
                                                       rank_, " ", what));
      }
      if (!state->context.valid()) {
        state->context = state->connecting.get_future().share();
        connects = true;
      }
    }
    if (connects) state->connecting.set_value(ConnectShared(group, me));
    ASSIGN_OR_RETURN(std::shared_ptr<GlooGroupContext> shared, AwaitShared(*state, group));
    const GlooTagSpace space{static_cast<uint32_t>(channel & ((uint64_t{1} << options_.channel_bits) - 1)),
                             options_.channel_bits};
    ASSIGN_OR_RETURN(const bool shares, Decide(state.get(), group, me, channel, space.slot, what));
    if (!shares) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        ++stats_.fallbacks;
      }
      return Connect(group, tag);
    }
    return Channel(std::move(shared), tag, space);
  }

  CollectiveBackendStats stats() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return stats_;
  }

 private:
  using SharedContext = absl::StatusOr<std::shared_ptr<GlooGroupContext>>;
  struct GroupState {
    std::promise<SharedContext> connecting;
    std::shared_future<SharedContext> context;  // valid once a channel started connecting it
    std::set<uint64_t> channels;                // channel ids connected on this member
    std::set<uint32_t> slots;                   // member 0: tag spaces taken on the shared context
  };

  static std::string GroupPrefix(const std::vector<int32_t>& group) {
    return absl::StrCat("gloo-channels/", absl::StrJoin(group, ","));
  }

  // This rank's position in `group` (InvalidArgument naming `what` if it has none).
  absl::StatusOr<int32_t> Member(const std::vector<int32_t>& group, const std::string& what) const {
    int32_t me = -1;
    for (size_t k = 0; k < group.size(); ++k) {
      if (group[k] < 0 || group[k] >= world_) {
        return absl::InvalidArgumentError(
            absl::StrCat("gloo: group member ", group[k], " outside the world [0, ", world_, ") ", what));
      }
      if (group[k] == rank_) me = static_cast<int32_t>(k);
    }
    if (me < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("gloo: rank ", rank_, " is not in group [", absl::StrJoin(group, ","), "] ", what));
    }
    return me;
  }

  std::unique_ptr<Communicator> Channel(std::shared_ptr<GlooGroupContext> context, const std::string& tag,
                                        GlooTagSpace space) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++stats_.channels;
    }
    return MakeGlooChannel(std::move(context), tag, space, options_.timeout_ms);
  }

  SharedContext ConnectShared(const std::vector<int32_t>& group, int32_t me) {
    absl::StatusOr<std::shared_ptr<::gloo::Context>> context =
        ConnectContext(absl::StrCat(GroupPrefix(group), "/shared"), group, me, "(the context its channels share)");
    if (!context.ok()) return context.status();
    return std::make_shared<GlooGroupContext>(std::move(*context), group, /*shared=*/true);
  }

  // The group's shared context, connected by another channel's ConnectChannel on this member
  // (bounded: that connect gives up after its own timeouts; this wait too, with a margin).
  SharedContext AwaitShared(const GroupState& state, const std::vector<int32_t>& group) const {
    const int64_t limit_ms = 3 * options_.timeout_ms + 1000;
    if (state.context.wait_for(std::chrono::milliseconds(limit_ms)) != std::future_status::ready) {
      return absl::DeadlineExceededError(absl::StrCat("gloo: rank ", rank_, " waited ", limit_ms,
                                                      " ms for the shared context of group [",
                                                      absl::StrJoin(group, ","), "]"));
    }
    return state.context.get();
  }

  // Whether `channel` shares the group's context (true) or gets its own: member 0 decides, the
  // others read its decision from the store.
  absl::StatusOr<bool> Decide(GroupState* state, const std::vector<int32_t>& group, int32_t me, uint64_t channel,
                              uint32_t slot, const std::string& what) {
    const std::string key = absl::StrCat(GroupPrefix(group), "/channel/", channel);
    const std::string shared = absl::StrCat("shared ", slot);
    if (me == 0) {
      bool shares;
      {
        std::lock_guard<std::mutex> lock(mu_);
        shares = state->slots.insert(slot).second;
      }
      RETURN_IF_ERROR(store_->Set(key, shares ? shared : "own"));
      return shares;
    }
    absl::StatusOr<std::string> decision = store_->Get(key, options_.timeout_ms);
    if (!decision.ok()) {
      return absl::Status(decision.status().code(),
                          absl::StrCat("gloo: group [", absl::StrJoin(group, ","), "] ", what, " on rank ", rank_,
                                       ": member 0 (rank ", group[0], ") did not place the channel within ",
                                       options_.timeout_ms, " ms: ", decision.status().message()));
    }
    if (*decision == "own") return false;
    if (*decision != shared) {
      return absl::InvalidArgumentError(absl::StrCat(
          "gloo: group [", absl::StrJoin(group, ","), "] ", what, ": member 0 (rank ", group[0], ") gave it '",
          *decision, "', rank ", rank_, " computes tag space ", slot, " (do the members use the same channel_bits?)"));
    }
    return true;
  }

  absl::StatusOr<std::shared_ptr<::gloo::Context>> ConnectContext(const std::string& prefix,
                                                                  const std::vector<int32_t>& group, int32_t me,
                                                                  const std::string& what) {
    RETURN_IF_ERROR(AwaitMembers(prefix, group, me, what));
    ASSIGN_OR_RETURN(std::shared_ptr<::gloo::transport::Device> device, Device(what));
    try {
      StoreAdapter adapter(store_, options_.timeout_ms);
      ::gloo::rendezvous::PrefixStore prefixed(prefix, adapter);
      auto context = std::make_shared<::gloo::rendezvous::Context>(me, static_cast<int>(group.size()));
      context->setTimeout(std::chrono::milliseconds(options_.timeout_ms));
      context->connectFullMesh(prefixed, device);
      {
        std::lock_guard<std::mutex> lock(mu_);
        ++stats_.contexts;
      }
      return std::shared_ptr<::gloo::Context>(std::move(context));
    } catch (const std::exception& e) {
      return absl::UnavailableError(absl::StrCat("gloo: connecting group [", absl::StrJoin(group, ","), "] ", what,
                                                 " from rank ", rank_, " failed: ", e.what()));
    }
  }

  // The backend's gloo device; ours is made at the first connect, with the job token.
  absl::StatusOr<std::shared_ptr<::gloo::transport::Device>> Device(const std::string& what) {
    std::lock_guard<std::mutex> lock(device_mu_);
    if (device_ != nullptr) return device_;
    OlGlooDeviceOptions ol;
    ol.bind_address = options_.hostname;
    ol.connect_timeout_ms = options_.timeout_ms;
    ol.job_token = options_.job_token;
    ol.max_early_bytes = options_.max_early_bytes;
    if (ol.job_token.empty()) {
      absl::StatusOr<std::string> token = store_->Get(kOlTokenKey, options_.timeout_ms);
      if (!token.ok()) {
        return absl::Status(token.status().code(),
                            absl::StrCat("gloo: rank ", rank_, " ", what, ": no job token for the ol transport ",
                                         "from rank 0 within ", options_.timeout_ms, " ms: ", token.status().message()));
      }
      ol.job_token = *token;
    }
    device_ = CreateOlGlooDevice(std::move(ol));
    return device_;
  }

  // gloo's pairs each listen on a port of their own until the first connection comes, and take
  // it as the peer unchecked (README: garbage at gloo's ports). So gloo opens them only once
  // every member is here: they listen for as long as the peers take to dial in, not for as
  // long as the slowest member takes to arrive.
  absl::Status AwaitMembers(const std::string& prefix, const std::vector<int32_t>& group, int32_t me,
                            const std::string& what) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(options_.timeout_ms);
    RETURN_IF_ERROR(store_->Set(absl::StrCat(prefix, "/arrived/", me), "1"));
    for (size_t k = 0; k < group.size(); ++k) {
      if (static_cast<int32_t>(k) == me) continue;
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      absl::StatusOr<std::string> arrived = store_->Get(absl::StrCat(prefix, "/arrived/", k), std::max<int64_t>(1, left.count()));
      if (!arrived.ok()) {
        return absl::Status(arrived.status().code(),
                            absl::StrCat("gloo: connecting group [", absl::StrJoin(group, ","), "] ", what,
                                         " from rank ", rank_, ": member ", k, " (rank ", group[k],
                                         ") did not arrive within ", options_.timeout_ms, " ms: ",
                                         arrived.status().message()));
      }
    }
    return absl::OkStatus();
  }

  RendezvousStore* store_;
  int32_t rank_, world_;
  GlooOptions options_;
  std::mutex device_mu_;
  std::shared_ptr<::gloo::transport::Device> device_;  // guarded by device_mu_
  mutable std::mutex mu_;
  std::map<std::vector<int32_t>, std::shared_ptr<GroupState>> groups_;  // ConnectChannel's groups
  CollectiveBackendStats stats_;
};

std::string RandomToken() {
  std::random_device random;
  std::string token;
  for (int k = 0; k < 4; ++k) absl::StrAppend(&token, absl::Hex(random(), absl::kZeroPad8));
  return token;
}

}  // namespace

const char* GlooTransportName(GlooTransport transport) {
  return transport == GlooTransport::kOl ? "ol" : "gloo_tcp";
}

absl::StatusOr<GlooTransport> ParseGlooTransport(const std::string& name) {
  if (name == "ol") return GlooTransport::kOl;
  if (name == "gloo_tcp") return GlooTransport::kGlooTcp;
  return absl::InvalidArgumentError(absl::StrCat(
      "gloo transport '", name, "' is none of 'ol' (ours: token-checked) and 'gloo_tcp' (gloo's own)"));
}

absl::StatusOr<std::unique_ptr<CollectiveBackend>> CreateGlooBackend(RendezvousStore* store, int32_t rank,
                                                                     int32_t world_size, GlooOptions options) {
  if (store == nullptr) return absl::InvalidArgumentError("gloo: no rendezvous store");
  if (rank < 0 || rank >= world_size) {
    return absl::InvalidArgumentError(absl::StrCat("gloo: rank ", rank, " outside the world [0, ", world_size, ")"));
  }
  if (options.timeout_ms <= 0) return absl::InvalidArgumentError("gloo: timeout_ms must be positive");
  if (options.max_early_bytes <= 0) return absl::InvalidArgumentError("gloo: max_early_bytes must be positive");
  if (options.channel_bits < 1 || options.channel_bits > GlooTagSpace::kMaxBits) {
    return absl::InvalidArgumentError(absl::StrCat("gloo: channel_bits must be in [1, ", GlooTagSpace::kMaxBits,
                                                   "], not ", options.channel_bits));
  }
  if (options.transport == GlooTransport::kOl) {
    in_addr address;
    if (inet_pton(AF_INET, options.hostname.c_str(), &address) != 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "gloo: hostname '", options.hostname, "' is not a numeric IPv4 address (the ol transport listens there)"));
    }
    if (options.job_token.empty() && rank == 0) {  // a token of this backend's world, shared through the store
      RETURN_IF_ERROR(store->Set(kOlTokenKey, RandomToken()));
    }
    return std::unique_ptr<CollectiveBackend>(new GlooBackend(store, rank, world_size, std::move(options), nullptr));
  }
  try {
    ::gloo::transport::tcp::attr attr(options.hostname.c_str());
    std::shared_ptr<::gloo::transport::Device> device = ::gloo::transport::tcp::CreateDevice(attr);
    return std::unique_ptr<CollectiveBackend>(new GlooBackend(store, rank, world_size, std::move(options), device));
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("gloo: cannot open a TCP device on '", options.hostname, "': ", e.what()));
  }
}

}  // namespace comm
}  // namespace oneflow_like
