#include "oneflow_like/actor/inplace_updates.h"

#include <algorithm>
#include <set>
#include <utility>

#include "oneflow_like/core/op_def.h"

namespace oneflow_like {
namespace actor {
namespace {

bool SameDesc(const TensorDescProto& a, const TensorDescProto& b) {
  return a.dtype() == b.dtype() && std::equal(a.dims().begin(), a.dims().end(), b.dims().begin(), b.dims().end());
}

bool SameStream(const TaskProto& a, const TaskProto& b) {
  return a.device().type() == b.device().type() && a.device().index() == b.device().index() &&
         a.stream_id() == b.stream_id();
}

}  // namespace

std::vector<InPlaceUpdate> FindInPlaceUpdates(const RankPlanProto& rank_plan,
                                              const std::map<int64_t, const RegisterProto*>& registers,
                                              const OpRegistry& registry) {
  std::map<int64_t, const TaskProto*> task_by_id;
  for (const TaskProto& task : rank_plan.tasks()) task_by_id[task.id()] = &task;
  // Variable slots: the register and slot each VARIABLE binding names, by tensor name.
  std::map<std::string, SlotRefProto> variable_slot;
  for (const TensorBindingProto& b : rank_plan.bindings()) {
    if (b.kind() == TensorBindingProto::VARIABLE) variable_slot[b.tensor_name()] = b.slot();
  }
  auto find_register = [&](int64_t id) -> const RegisterProto* {
    auto it = registers.find(id);
    return it == registers.end() || !it->second->has_memory() ? nullptr : it->second;
  };
  // Holders with exactly one consumed register (their update), grouped by that register.
  std::map<int64_t, std::vector<InPlaceTarget>> by_update;
  for (const TaskProto& h : rank_plan.tasks()) {
    if (h.type() != TaskProto::SOURCE || !h.has_io()) continue;
    auto var = variable_slot.find(h.io().tensor_name());
    if (var == variable_slot.end() || h.consumed_register_ids_size() != 1 || h.inputs_size() != 1) continue;
    InPlaceTarget t;
    t.holder_task = h.id();
    t.variable_register = var->second.register_id();
    t.variable_slot = var->second.slot();
    t.update_slot = h.inputs(0).slot();
    if (h.inputs(0).register_id() != h.consumed_register_ids(0) ||
        std::find(h.produced_register_ids().begin(), h.produced_register_ids().end(), t.variable_register) ==
            h.produced_register_ids().end())
      continue;
    by_update[h.consumed_register_ids(0)].push_back(t);
  }
  std::vector<InPlaceUpdate> result;
  for (const auto& [update_id, targets] : by_update) {
    const RegisterProto* ru = find_register(update_id);
    if (ru == nullptr || ru->count() != 1) continue;
    // Rule 2: RU's consumers are exactly these holders, one per slot, covering every slot.
    if (ru->consumers_size() != static_cast<int>(targets.size()) ||
        static_cast<int>(targets.size()) != ru->slots_size())
      continue;
    std::set<int32_t> slots;
    std::set<int64_t> holder_ids;
    for (const InPlaceTarget& t : targets) {
      slots.insert(t.update_slot);
      holder_ids.insert(t.holder_task);
    }
    bool ok = static_cast<int>(slots.size()) == ru->slots_size();
    for (const TaskRefProto& c : ru->consumers()) ok = ok && c.rank() == rank_plan.rank() && holder_ids.count(c.task_id());
    if (!ok) continue;
    // Rule 1: a COMPUTE producer on the holders' stream, with a known op.
    auto o_it = task_by_id.find(ru->producer().task_id());
    if (o_it == task_by_id.end() || o_it->second->type() != TaskProto::COMPUTE) continue;
    const TaskProto& o = *o_it->second;
    const OpDef* def = registry.Find(o.compute().op_type());
    if (def == nullptr) continue;
    int64_t block = -1;
    for (const InPlaceTarget& t : targets) {
      const TaskProto* h = task_by_id.at(t.holder_task);
      const RegisterProto* rh = find_register(t.variable_register);
      if (!SameStream(o, *h) || rh == nullptr || rh->count() != 1 || t.variable_slot < 0 ||
          t.variable_slot >= rh->slots_size() || t.update_slot < 0 || t.update_slot >= ru->slots_size() ||
          !SameDesc(rh->slots(t.variable_slot), ru->slots(t.update_slot)) ||
          (block >= 0 && rh->memory().block_id() != block)) {
        ok = false;
        break;
      }
      block = rh->memory().block_id();
      // Rule 3: O's output for this slot may alias O's input that is the variable's slot.
      int k = -1;
      for (int j = 0; j < o.outputs_size(); ++j) {
        if (o.outputs(j).register_id() == update_id && o.outputs(j).slot() == t.update_slot) k = j;
      }
      bool paired = false;
      for (const auto& [out, in] : def->inplace_pairs) {
        paired = paired || (out == k && in >= 0 && in < o.inputs_size() &&
                            o.inputs(in).register_id() == t.variable_register &&
                            o.inputs(in).slot() == t.variable_slot);
      }
      // O holds RH through exactly one port (so "only O holds it" is a count of 1).
      const int64_t ports = std::count(o.consumed_register_ids().begin(), o.consumed_register_ids().end(),
                                       t.variable_register);
      ok = ok && k >= 0 && paired && ports == 1;
      if (!ok) break;
    }
    if (!ok) continue;
    result.push_back(InPlaceUpdate{update_id, o.id(), targets});
  }
  // Rule 4: every register O produces is such an update, so nothing within the step depends on
  // O (a holder's absorb emits nothing until the next step). Otherwise a reader of a variable
  // could wait for O while O waits for it to return the variable.
  std::set<int64_t> updates;
  for (const InPlaceUpdate& u : result) updates.insert(u.update_register);
  std::vector<InPlaceUpdate> kept;
  for (InPlaceUpdate& u : result) {
    const TaskProto& o = *task_by_id.at(u.optimizer_task);
    const bool only_updates = std::all_of(o.produced_register_ids().begin(), o.produced_register_ids().end(),
                                          [&](int64_t id) { return updates.count(id) > 0; });
    if (only_updates) kept.push_back(std::move(u));
  }
  return kept;
}

}  // namespace actor
}  // namespace oneflow_like
