// Devices within a rank (plan_verifier.h, parts of checks 3 and 4): a COPY connects two devices
// of its own rank; on a rank whose memory blocks are on more than one device (a cpu data source
// feeding a cuda placement), every register lies in a block of the device its producer writes
// (a COPY: CopyParams.to) and every payload input is read on its task's device (a COPY's on
// CopyParams.from). A rank on one device skips the per-register part: nothing can disagree.
#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "oneflow_like/compiler/plan/plan_checks.h"
#include "oneflow_like/core/status.h"

namespace oneflow_like {
namespace compiler {
namespace {

bool SameDevice(const DeviceProto& a, const DeviceProto& b) {
  return a.type() == b.type() && a.index() == b.index();
}

std::string DeviceText(const DeviceProto& d) { return absl::StrCat(d.type(), ":", d.index()); }

// The device of block `id` on `rank_plan`, nullptr if it has no such block.
const DeviceProto* BlockDevice(const RankPlanProto& rank_plan, int64_t id) {
  for (const MemoryBlockProto& block : rank_plan.memory_blocks()) {
    if (block.id() == id) return &block.device();
  }
  return nullptr;
}

// The device `reg` (a local register of `rank_plan`) lives on, nullptr if it has no memory or
// its block is missing (reported by the memory checks).
const DeviceProto* RegisterDevice(const RankPlanProto& rank_plan, const RegisterProto& reg) {
  return reg.has_memory() ? BlockDevice(rank_plan, reg.memory().block_id()) : nullptr;
}

// The device a task writes its outputs on.
const DeviceProto& WrittenDevice(const TaskProto& task) {
  return task.type() == TaskProto::COPY && task.has_copy() ? task.copy().to() : task.device();
}

}  // namespace

absl::Status CopyAcrossRanksError(const TaskProto& task, int32_t other_rank, int64_t register_id) {
  return PlanError(absl::StrCat(PlanIndex::TaskLabel(task), " reads register ", register_id, " of rank ", other_rank,
                                "; a COPY moves data between two devices of its own rank ", task.rank(),
                                ", a move between ranks is a TRANSFER"));
}

absl::Status CheckCopyTask(const PlanIndex& index, const TaskProto& task) {
  auto label = [&] { return PlanIndex::TaskLabel(task); };
  if (!task.has_copy()) return PlanError(label() + " has no CopyParams (the devices it copies from and to)");
  const DeviceProto& from = task.copy().from();
  const DeviceProto& to = task.copy().to();
  if (SameDevice(from, to)) {
    return PlanError(absl::StrCat(label(), " copies from ", DeviceText(from), " to ", DeviceText(to),
                                  "; a COPY connects two different devices of rank ", task.rank()));
  }
  if (!SameDevice(task.device(), from) && !SameDevice(task.device(), to)) {
    return PlanError(absl::StrCat(label(), " runs on ", DeviceText(task.device()), ", which is neither end of its copy ",
                                  DeviceText(from), " -> ", DeviceText(to)));
  }
  if (task.stream_kind() != STREAM_COPY) {
    return PlanError(absl::StrCat(label(), " runs on a ", StreamKindProto_Name(task.stream_kind()),
                                  " stream; a COPY runs on a copy stream (STREAM_COPY)"));
  }
  if (task.inputs_size() == 0 || task.inputs_size() != task.outputs_size()) {
    return PlanError(absl::StrCat(label(), " has ", task.inputs_size(), " payload input(s) and ", task.outputs_size(),
                                  " output(s); a COPY copies each input into the output of the same index"));
  }
  const RankPlanProto* rank_plan = index.FindRank(task.rank());
  if (rank_plan == nullptr) return PlanError(label() + " is on a rank without a plan");
  for (int i = 0; i < task.inputs_size(); ++i) {
    const RegisterProto* in = index.FindEntry(task.rank(), task.inputs(i).register_id());
    const RegisterProto* out = index.FindEntry(task.rank(), task.outputs(i).register_id());
    if (in == nullptr || out == nullptr) continue;  // reported by the slot-ref checks
    if (in->has_remote()) return CopyAcrossRanksError(task, in->remote().rank(), in->id());
    const TensorDescProto& a = in->slots(task.inputs(i).slot());
    const TensorDescProto& b = out->slots(task.outputs(i).slot());
    if (a.dtype() != b.dtype() || !std::equal(a.dims().begin(), a.dims().end(), b.dims().begin(), b.dims().end())) {
      return PlanError(absl::StrCat(label(), " copies ", SlotText(a), " into ", SlotText(b),
                                    "; input and output ", i, " must have the same dtype and shape"));
    }
    for (const auto& [reg, want, what] : {std::make_tuple(in, &from, "input"), std::make_tuple(out, &to, "output")}) {
      const DeviceProto* device = RegisterDevice(*rank_plan, *reg);
      if (device != nullptr && !SameDevice(*device, *want)) {
        return PlanError(absl::StrCat(label(), " copies ", DeviceText(from), " -> ", DeviceText(to), ", but its ", what,
                                      " ", PlanIndex::RegisterLabel(task.rank(), *reg), " is in a block on ",
                                      DeviceText(*device)));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status CheckRankDevices(const PlanIndex& index) {
  for (const RankPlanProto& rank_plan : index.plan().rank_plans()) {
    const auto& blocks = rank_plan.memory_blocks();
    const bool several = std::any_of(blocks.begin(), blocks.end(), [&](const MemoryBlockProto& b) {
      return !SameDevice(b.device(), blocks.Get(0).device());
    });
    if (!several) continue;
    for (const RegisterProto& reg : rank_plan.registers()) {
      if (reg.has_remote()) continue;
      const DeviceProto* device = RegisterDevice(rank_plan, reg);
      const TaskProto* producer = index.FindTask(reg.producer().task_id());
      if (device == nullptr || producer == nullptr) continue;  // reported by the register / memory checks
      if (!SameDevice(*device, WrittenDevice(*producer))) {
        return PlanError(absl::StrCat(PlanIndex::RegisterLabel(rank_plan.rank(), reg), " is in block ",
                                      reg.memory().block_id(), " on ", DeviceText(*device), ", but its producer ",
                                      PlanIndex::TaskLabel(*producer), " writes ",
                                      DeviceText(WrittenDevice(*producer))));
      }
    }
    for (const TaskProto& task : rank_plan.tasks()) {
      if (task.type() == TaskProto::COPY) continue;  // CheckCopyTask
      for (const SlotRefProto& ref : task.inputs()) {
        const RegisterProto* reg = index.FindEntry(task.rank(), ref.register_id());
        const DeviceProto* device = reg == nullptr ? nullptr : RegisterDevice(rank_plan, *reg);
        if (device == nullptr || SameDevice(*device, task.device())) continue;
        return PlanError(absl::StrCat(PlanIndex::TaskLabel(task), " runs on ", DeviceText(task.device()), " but reads ",
                                      PlanIndex::RegisterLabel(task.rank(), *reg), " on ", DeviceText(*device),
                                      "; a value moves between devices of a rank through a COPY"));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace compiler
}  // namespace oneflow_like
