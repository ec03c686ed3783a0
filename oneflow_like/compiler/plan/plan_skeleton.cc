#include "oneflow_like/compiler/plan/plan_skeleton.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "oneflow_like/compiler/plan/plan_checks.h"
#include "oneflow_like/compiler/plan/plan_errors.h"
#include "oneflow_like/core/status.h"

namespace oneflow_like {
namespace compiler {

absl::string_view InternTable::Store(absl::string_view text) {
  if (text.size() > chunk_left_) {
    const size_t size = std::max(size_t{1} << 20, text.size());
    chunks_.push_back(std::make_unique<char[]>(size));
    next_ = chunks_.back().get();
    chunk_left_ = size;
  }
  char* at = next_;
  if (!text.empty()) std::memcpy(at, text.data(), text.size());
  next_ += text.size();
  chunk_left_ -= text.size();
  return absl::string_view(at, text.size());
}

uint32_t InternTable::Intern(absl::string_view text) {
  auto it = ids_.find(text);
  if (it != ids_.end()) return it->second;
  const uint32_t id = static_cast<uint32_t>(texts_.size());
  const absl::string_view stored = Store(text);
  ids_.emplace(stored, id);
  texts_.push_back(stored);
  return id;
}

NameRef InternTable::AddName(absl::string_view name) {
  const size_t at = name.rfind("@r");
  const absl::string_view digits = at == absl::string_view::npos ? absl::string_view() : name.substr(at + 2);
  // Canonical decimal only ("@r0", "@r17"; not "@r007"), so that stem + suffix gives the name back.
  const bool canonical = !digits.empty() && digits.size() <= 9 && (digits[0] != '0' || digits.size() == 1) &&
                         std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; });
  if (!canonical) return NameRef{Intern(name), -1};
  int32_t rank = 0;
  for (char c : digits) rank = rank * 10 + (c - '0');
  return NameRef{Intern(name.substr(0, at)), rank};
}

std::string InternTable::Name(NameRef ref) const {
  return ref.suffix < 0 ? std::string(Get(ref.stem)) : absl::StrCat(Get(ref.stem), "@r", ref.suffix);
}

uint32_t InternTable::AddSlots(const RegisterProto& reg) {
  scratch_.clear();
  auto put = [this](const void* data, size_t bytes) { scratch_.append(static_cast<const char*>(data), bytes); };
  for (const TensorDescProto& slot : reg.slots()) {
    const int32_t head[2] = {static_cast<int32_t>(slot.dtype()), slot.dims_size()};
    put(head, sizeof(head));
    put(slot.dims().data(), sizeof(int64_t) * slot.dims_size());
  }
  return Intern(scratch_);
}

google::protobuf::RepeatedPtrField<TensorDescProto> InternTable::Slots(uint32_t id) const {
  google::protobuf::RepeatedPtrField<TensorDescProto> slots;
  const absl::string_view text = Get(id);
  for (size_t at = 0; at < text.size();) {
    int32_t head[2];
    std::memcpy(head, text.data() + at, sizeof(head));
    at += sizeof(head);
    TensorDescProto& slot = *slots.Add();
    slot.set_dtype(static_cast<DataTypeProto>(head[0]));
    for (int32_t d = 0; d < head[1]; ++d, at += sizeof(int64_t)) {
      int64_t dim;
      std::memcpy(&dim, text.data() + at, sizeof(dim));
      slot.add_dims(dim);
    }
  }
  return slots;
}

std::string PlanSkeleton::TaskLabel(int64_t t) const {
  return absl::StrCat("rank ", task_rank[t], " task ", task_id[t], " '", strings.Name(task_name[t]), "' (",
                      TaskProto::Type_Name(static_cast<TaskProto::Type>(task_type[t])), ")");
}

std::string PlanSkeleton::RegisterLabel(int64_t r) const {
  return absl::StrCat("register ", register_id[r], " '", strings.Name(register_name[r]), "' on rank ",
                      register_rank[r]);
}

std::string PlanSkeleton::MirrorLabel(const Mirror& m) const {
  return absl::StrCat("mirror register ", m.id, " '", strings.Name(m.name), "' on rank ", m.rank);
}

namespace {

class CrossRankChecks {
 public:
  CrossRankChecks(PlanSkeleton& s, const SimGraphBuilder& builder, const SimGraph& graph)
      : s_(s), builder_(builder), graph_(graph) {
    std::sort(s_.mirror_reads.begin(), s_.mirror_reads.end());
    mirror_order_.resize(s_.mirrors.size());
    for (size_t i = 0; i < mirror_order_.size(); ++i) mirror_order_[i] = static_cast<int64_t>(i);
    std::sort(mirror_order_.begin(), mirror_order_.end(), [this](int64_t a, int64_t b) {
      const auto& x = s_.mirrors[a];
      const auto& y = s_.mirrors[b];
      return std::make_pair(x.id, x.rank) < std::make_pair(y.id, y.rank);
    });
  }

  // Registers rank by rank in list order, as CheckRegisters visits them.
  absl::Status Registers() {
    size_t ref = 0;
    auto producing_before = [&](int64_t end) -> absl::Status {
      for (; ref < s_.remote_consumers.size() && s_.remote_consumers[ref].first < end; ++ref) {
        RETURN_IF_ERROR(RemoteConsumer(s_.remote_consumers[ref].first, s_.remote_consumers[ref].second));
      }
      return absl::OkStatus();
    };
    for (size_t m = 0; m < s_.mirrors.size(); ++m) {
      RETURN_IF_ERROR(producing_before(s_.mirrors[m].next_register));
      RETURN_IF_ERROR(Mirror(m));
    }
    return producing_before(s_.register_id.size());
  }

  absl::Status CollectiveSequences();

 private:
  using MirrorEntry = PlanSkeleton::Mirror;

  const MirrorEntry* FindMirror(int32_t rank, int64_t id) const {
    auto it = std::lower_bound(mirror_order_.begin(), mirror_order_.end(), std::make_pair(id, rank),
                               [this](int64_t m, const std::pair<int64_t, int32_t>& key) {
                                 return std::make_pair(s_.mirrors[m].id, s_.mirrors[m].rank) < key;
                               });
    if (it == mirror_order_.end() || s_.mirrors[*it].id != id || s_.mirrors[*it].rank != rank) return nullptr;
    return &s_.mirrors[*it];
  }
  bool MirrorLists(const MirrorEntry& m, int64_t task_id, int32_t rank) const {
    const size_t index = static_cast<size_t>(&m - s_.mirrors.data());
    const int64_t end = index + 1 < s_.mirrors.size() ? s_.mirrors[index + 1].consumers_begin
                                                      : static_cast<int64_t>(s_.mirror_consumers.size());
    for (int64_t c = m.consumers_begin; c < end; ++c) {
      if (s_.mirror_consumers[c].task_id == task_id && s_.mirror_consumers[c].rank == rank) return true;
    }
    return false;
  }
  bool ListsRemote(int32_t r, int64_t task_id, int32_t rank) const {
    auto it = std::lower_bound(s_.remote_consumers.begin(), s_.remote_consumers.end(), r,
                               [](const std::pair<int32_t, TaskRef>& e, int32_t key) { return e.first < key; });
    for (; it != s_.remote_consumers.end() && it->first == r; ++it) {
      if (it->second.task_id == task_id && it->second.rank == rank) return true;
    }
    return false;
  }

  // CheckProducingRegister's part for a consumer on another rank.
  absl::Status RemoteConsumer(int32_t r, const TaskRef& ref) const {
    const int32_t t = builder_.TaskIndex(ref.task_id);
    if (t < 0 || s_.task_rank[t] != ref.rank) {
      return ConsumerMissingError(s_.RegisterLabel(r), ref.task_id, ref.rank, t < 0 ? -1 : s_.task_rank[t]);
    }
    if (!std::binary_search(s_.mirror_reads.begin(), s_.mirror_reads.end(),
                            std::make_pair(s_.register_id[r], ref.task_id))) {
      return ConsumerNotConsumingError(s_.RegisterLabel(r), s_.TaskLabel(t));
    }
    const int32_t rank = s_.register_rank[r];
    const MirrorEntry* mirror = FindMirror(ref.rank, s_.register_id[r]);
    if (mirror == nullptr || mirror->remote_rank != rank || !MirrorLists(*mirror, ref.task_id, ref.rank)) {
      return NoMirrorError(s_.RegisterLabel(r), s_.TaskLabel(t), ref.rank, rank);
    }
    return absl::OkStatus();
  }

  // CheckMirror's part that needs the producing rank.
  absl::Status Mirror(size_t index) const {
    const MirrorEntry& m = s_.mirrors[index];
    const int32_t source_rank = m.remote_rank;
    const int32_t r = builder_.RegisterIndex(m.id);
    if (r < 0 || s_.register_rank[r] != source_rank) {
      return MirrorWithoutSourceError(s_.MirrorLabel(m), source_rank, m.id);
    }
    const int32_t producer = graph_.producer[r];
    const int64_t producer_id = producer < 0 ? -1 : s_.task_id[producer];
    if (m.producer.task_id != producer_id || m.producer.rank != source_rank) {
      return MirrorProducerError(s_.MirrorLabel(m), m.producer.task_id, m.producer.rank, producer_id, source_rank,
                                 source_rank);
    }
    if (m.slots != s_.register_slots[r]) {  // interned: equal ids are equal lists
      RETURN_IF_ERROR(CheckMirrorSlots(s_.MirrorLabel(m), source_rank, s_.strings.Slots(m.slots),
                                       s_.strings.Slots(s_.register_slots[r])));
    }
    const int64_t end = index + 1 < s_.mirrors.size() ? s_.mirrors[index + 1].consumers_begin
                                                      : static_cast<int64_t>(s_.mirror_consumers.size());
    for (int64_t c = m.consumers_begin; c < end; ++c) {
      const TaskRef& consumer = s_.mirror_consumers[c];
      if (ListsRemote(r, consumer.task_id, m.rank)) continue;
      return UnlistedMirrorConsumerError(s_.TaskLabel(builder_.TaskIndex(consumer.task_id)), s_.MirrorLabel(m),
                                         s_.RegisterLabel(r));
    }
    return absl::OkStatus();
  }

  PlanSkeleton& s_;
  const SimGraphBuilder& builder_;
  const SimGraph& graph_;
  std::vector<int64_t> mirror_order_;  // mirrors by (id, rank)
};

absl::Status CrossRankChecks::CollectiveSequences() {
  // Groups in the order of their rank lists; a member's calls by global_order.
  std::vector<int32_t> ordinal(s_.groups.size());
  std::vector<const std::vector<int32_t>*> members(s_.groups.size());
  int32_t next = 0;
  for (const auto& [ranks, id] : s_.groups) {
    members[next] = &ranks;
    ordinal[id] = next++;
  }
  auto key = [&](const PlanSkeleton::Collective& c) {
    return std::make_tuple(ordinal[c.group], c.rank, c.global_order, c.task);
  };
  std::vector<PlanSkeleton::Collective>& calls = s_.collectives;
  std::sort(calls.begin(), calls.end(),
            [&](const PlanSkeleton::Collective& a, const PlanSkeleton::Collective& b) { return key(a) < key(b); });
  auto text = [&](const PlanSkeleton::Collective* c) -> std::string {
    if (c == nullptr) return "nothing";
    return CollectiveCallText(c->global_order, static_cast<CollectiveParams::Kind>(c->kind), s_.TaskLabel(c->task));
  };
  size_t begin = 0;
  while (begin < calls.size()) {
    const int32_t group = ordinal[calls[begin].group];
    size_t end = begin;
    while (end < calls.size() && ordinal[calls[end].group] == group) ++end;
    auto sequence = [&](int32_t rank) {
      auto first = std::lower_bound(calls.begin() + begin, calls.begin() + end, rank,
                                    [](const PlanSkeleton::Collective& c, int32_t r) { return c.rank < r; });
      auto last = std::upper_bound(first, calls.begin() + end, rank,
                                   [](int32_t r, const PlanSkeleton::Collective& c) { return r < c.rank; });
      return std::make_pair(first, last);
    };
    const std::vector<int32_t>& ranks = *members[group];
    const auto reference = sequence(ranks.front());
    for (int32_t rank : ranks) {
      const auto have = sequence(rank);
      const size_t want_size = reference.second - reference.first, have_size = have.second - have.first;
      for (size_t i = 0; i < std::max(want_size, have_size); ++i) {
        const PlanSkeleton::Collective* want = i < want_size ? &*(reference.first + i) : nullptr;
        const PlanSkeleton::Collective* got = i < have_size ? &*(have.first + i) : nullptr;
        if (want != nullptr && got != nullptr && want->global_order == got->global_order && want->kind == got->kind) {
          continue;
        }
        return CollectiveSequenceError(ranks, i, text(want), rank, text(got));
      }
    }
    begin = end;
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckAcrossRanks(PlanSkeleton& skeleton, const SimGraphBuilder& builder, const SimGraph& graph) {
  CrossRankChecks checks(skeleton, builder, graph);
  RETURN_IF_ERROR(checks.Registers());
  RETURN_IF_ERROR(checks.CollectiveSequences());
  return skeleton.call_difference;
}

}  // namespace compiler
}  // namespace oneflow_like
