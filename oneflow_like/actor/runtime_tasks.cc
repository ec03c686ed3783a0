// Runtime::AddBinding and Runtime::SetUpTask: what each binding and each task type needs.
#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "oneflow_like/actor/collective_body.h"
#include "oneflow_like/actor/holder_body.h"
#include "oneflow_like/actor/runtime.h"
#include "oneflow_like/core/attr_proto.h"
#include "oneflow_like/core/initializer.h"

namespace oneflow_like {
namespace actor {
namespace {

std::string TaskLabel(const TaskProto& task) { return absl::StrCat("task '", task.name(), "' (id ", task.id(), ")"); }

// Maps the task's SlotRefs onto ports. A consumed register none of whose slots is named is a
// control input (it paces the task, its contents are not read).
absl::StatusOr<std::vector<PayloadRef>> ResolvePayload(const TaskProto& task,
                                                       const google::protobuf::RepeatedPtrField<SlotRefProto>& refs,
                                                       const google::protobuf::RepeatedField<int64_t>& register_ids,
                                                       const std::vector<const RegisterLayout*>& layouts,
                                                       const char* side) {
  std::vector<PayloadRef> out;
  for (const SlotRefProto& ref : refs) {
    auto it = std::find(register_ids.begin(), register_ids.end(), ref.register_id());
    if (it == register_ids.end()) {
      return absl::InvalidArgumentError(absl::StrCat(TaskLabel(task), ": payload ", side, " names register ",
                                                     ref.register_id(), ", which is not among its ", side,
                                                     " registers"));
    }
    const int32_t port = static_cast<int32_t>(it - register_ids.begin());
    if (ref.slot() < 0 || ref.slot() >= static_cast<int32_t>(layouts[port]->slots.size())) {
      return absl::InvalidArgumentError(absl::StrCat(TaskLabel(task), ": payload ", side, " slot ", ref.slot(),
                                                     " of register '", layouts[port]->name, "', which has ",
                                                     layouts[port]->slots.size(), " slots"));
    }
    out.push_back(PayloadRef{port, ref.slot()});
  }
  return out;
}

// A COPY's end without a type (host-only plans leave CopyParams unset) is host memory.
bool IsHost(const DeviceProto& device) { return device.type().empty() || device.type() == "cpu"; }

ShardInfo ShardFromProto(const ShardInfoProto& proto, const Shape& physical) {
  if (proto.logical_dims().empty() && physical.num_axes() > 0) return ShardInfo::Whole(physical);
  ShardInfo info{Shape(std::vector<int64_t>(proto.logical_dims().begin(), proto.logical_dims().end())),
                 std::vector<int64_t>(proto.offset().begin(), proto.offset().end())};
  if (info.offset.empty()) info.offset.assign(info.logical_shape.num_axes(), 0);
  return info;
}

}  // namespace

absl::Status Runtime::AddBinding(const TensorBindingProto& binding) {
  const std::string& name = binding.tensor_name();
  auto layout_it = layout_by_id_.find(binding.slot().register_id());
  if (bindings_.count(name) > 0) return absl::InvalidArgumentError(absl::StrCat("tensor '", name, "' is bound twice"));
  if (layout_it == layout_by_id_.end() || binding.slot().slot() < 0 ||
      binding.slot().slot() >= static_cast<int32_t>(layout_it->second->slots.size())) {
    return absl::InvalidArgumentError(absl::StrCat("binding of '", name, "' names slot ", binding.slot().slot(),
                                                   " of register ", binding.slot().register_id(),
                                                   ", which is not a payload slot of a local register"));
  }
  const RegisterLayout* layout = layout_it->second;
  const TensorDesc& desc = layout->slots[binding.slot().slot()];
  const ShardInfo shard = ShardFromProto(binding.shard(), desc.shape);
  bool fits = shard.logical_shape.num_axes() == desc.shape.num_axes() &&
              static_cast<int>(shard.offset.size()) == desc.shape.num_axes();
  for (int a = 0; fits && a < desc.shape.num_axes(); ++a) {
    fits = shard.offset[a] >= 0 && shard.offset[a] + desc.shape.dim(a) <= shard.logical_shape.dim(a);
  }
  if (!fits) {
    return absl::InvalidArgumentError(absl::StrCat("binding of '", name, "': shard ", desc.shape.ToString(),
                                                   " does not fit its logical shape ", shard.logical_shape.ToString(),
                                                   " at the given offset"));
  }
  bindings_[name] = binding;
  binding_descs_[name] = desc;
  binding_offsets_[name] = shard.offset;
  if (binding.kind() == TensorBindingProto::VARIABLE) {
    const bool on_device = DeviceOf(binding.slot().register_id()) >= 0;
    Tensor host = on_device ? Tensor(desc) : layout->View(0, binding.slot().slot());  // device: via the host
    absl::Status status = InitializeShard(binding.initializer(), shard.logical_shape, shard.offset, &host);
    if (!status.ok()) return absl::InvalidArgumentError(absl::StrCat("variable '", name, "': ", status.message()));
    if (on_device) RETURN_IF_ERROR(WriteSlot(*layout, 0, binding.slot().slot(), host));
  }
  return absl::OkStatus();
}

absl::StatusOr<Runtime::TaskSetup> Runtime::SetUpTask(const TaskProto& task, int64_t firings_per_step,
                                                      ActorSpec* spec) {
  std::vector<const RegisterLayout*> in_layouts, out_layouts;
  for (const InputPort& in : spec->inputs) in_layouts.push_back(in.layout);
  for (const OutputPort& out : spec->outputs) out_layouts.push_back(out.layout);
  ASSIGN_OR_RETURN(spec->payload_inputs,
                   ResolvePayload(task, task.inputs(), task.consumed_register_ids(), in_layouts, "input"));
  ASSIGN_OR_RETURN(spec->payload_outputs,
                   ResolvePayload(task, task.outputs(), task.produced_register_ids(), out_layouts, "output"));
  auto in_desc = [&](size_t i) {
    return in_layouts[spec->payload_inputs[i].port]->slots[spec->payload_inputs[i].slot];
  };
  auto out_desc = [&](size_t i) {
    return out_layouts[spec->payload_outputs[i].port]->slots[spec->payload_outputs[i].slot];
  };
  auto error = [&](auto&&... parts) {
    return absl::InvalidArgumentError(absl::StrCat(TaskLabel(task), ": ", parts...));
  };
  // Payload i in -> payload i out with equal descs (TRANSFER, REPEAT, ACCUMULATE, holder update).
  auto check_pairwise = [&]() -> absl::Status {
    if (spec->payload_inputs.size() != spec->payload_outputs.size()) {
      return error(spec->payload_inputs.size(), " payload inputs but ", spec->payload_outputs.size(), " outputs");
    }
    for (size_t i = 0; i < spec->payload_inputs.size(); ++i) {
      if (in_desc(i) != out_desc(i))
        return error("payload ", i, " is ", in_desc(i).ToString(), " in but ", out_desc(i).ToString(), " out");
    }
    return absl::OkStatus();
  };
  if (task.type() != TaskProto::SOURCE && task.consumed_register_ids().empty()) {
    return error("consumes no register; only SOURCE tasks fire without inputs");
  }
  // A task on an accelerator (device_backend.h): its bodies come from the backend.
  const bool on_device = task.device().type() != "cpu";
  DeviceTask device_task;
  device_task.device = task.device().index();
  device_task.stream = task.stream_id();
  device_task.name = task.name();
  auto device_body = [&](DeviceTask::Kind kind) {
    device_task.kind = kind;
    return MakeDeviceBody(task, device_task);
  };
  RETURN_IF_ERROR(CheckPayloadMemory(task, *spec, in_layouts, out_layouts));
  TaskSetup setup;
  switch (task.type()) {
    case TaskProto::COMPUTE: {
      if (env_.registry == nullptr) return error("COMPUTE task but RuntimeEnv.registry is null");
      const ComputeParams& params = task.compute();
      absl::StatusOr<const OpDef*> def = env_.registry->Get(params.op_type());
      if (!def.ok()) return error(def.status().message());
      absl::StatusOr<AttrMap> raw = AttrMapFromProto(params.attrs());
      if (!raw.ok()) return error(raw.status().message());
      const std::string op_name = task.op_name().empty() ? task.name() : task.op_name();
      absl::StatusOr<AttrMap> attrs = (*def)->ValidateAttrs(op_name, *raw);
      if (!attrs.ok()) return error(attrs.status().message());
      if ((!(*def)->variadic_inputs && spec->payload_inputs.size() != (*def)->inputs.size()) ||
          (!(*def)->variadic_outputs && spec->payload_outputs.size() != (*def)->outputs.size())) {
        return error("op '", params.op_type(), "' takes ", (*def)->inputs.size(), " inputs and ",
                     (*def)->outputs.size(), " outputs; the task has ", spec->payload_inputs.size(), " and ",
                     spec->payload_outputs.size());
      }
      if ((params.input_shards_size() != 0 && params.input_shards_size() != int(spec->payload_inputs.size())) ||
          (params.output_shards_size() != 0 && params.output_shards_size() != int(spec->payload_outputs.size()))) {
        return error("ComputeParams has ", params.input_shards_size(), "/", params.output_shards_size(),
                     " input/output shards for ", spec->payload_inputs.size(), "/", spec->payload_outputs.size(),
                     " tensors");
      }
      std::vector<ShardInfo> in_shards, out_shards;
      for (size_t i = 0; i < spec->payload_inputs.size(); ++i) {
        in_shards.push_back(
            ShardFromProto(params.input_shards_size() ? params.input_shards(i) : ShardInfoProto(), in_desc(i).shape));
      }
      for (size_t i = 0; i < spec->payload_outputs.size(); ++i) {
        out_shards.push_back(ShardFromProto(params.output_shards_size() ? params.output_shards(i) : ShardInfoProto(),
                                            out_desc(i).shape));
      }
      if (on_device) {
        device_task.def = *def;
        device_task.op_name = op_name;
        device_task.attrs = *std::move(attrs);
        device_task.input_shards = std::move(in_shards);
        device_task.output_shards = std::move(out_shards);
        ASSIGN_OR_RETURN(setup.body, device_body(DeviceTask::Kind::kCompute));
        break;
      }
      setup.body =
          std::make_unique<ComputeBody>(*def, op_name, *std::move(attrs), std::move(in_shards), std::move(out_shards),
                                        intra_op_pool_.get());
      break;
    }
    case TaskProto::TRANSFER:
      if (spec->inputs.size() != 1 || spec->inputs[0].mirror == nullptr)
        return error("a TRANSFER consumes exactly one remote register");
      RETURN_IF_ERROR(check_pairwise());
      if (on_device) {  // the mirror's host staging to the device
        ASSIGN_OR_RETURN(setup.body, device_body(DeviceTask::Kind::kHostToDevice));
      } else {
        setup.body = std::make_unique<CopyBody>();
      }
      break;
    case TaskProto::BOXING_SLICE:
    case TaskProto::BOXING_CONCAT: {
      const bool slice = task.type() == TaskProto::BOXING_SLICE;
      const auto& regions = slice ? task.slice().output_regions() : task.concat().input_regions();
      const size_t parts = slice ? spec->payload_outputs.size() : spec->payload_inputs.size();
      const size_t wholes = slice ? spec->payload_inputs.size() : spec->payload_outputs.size();
      if (wholes != 1 || static_cast<size_t>(regions.size()) != parts) {
        return error(slice ? "BOXING_SLICE needs 1 input and one region per output"
                           : "BOXING_CONCAT needs 1 output and one region per input",
                     " (", spec->payload_inputs.size(), " inputs, ", spec->payload_outputs.size(), " outputs, ",
                     regions.size(), " regions)");
      }
      const TensorDesc whole = slice ? in_desc(0) : out_desc(0);
      std::vector<std::vector<int64_t>> begins;
      for (size_t k = 0; k < parts; ++k) {
        const TensorDesc part = slice ? out_desc(k) : in_desc(k);
        const RegionProto& r = regions[k];
        bool ok = part.dtype == whole.dtype && r.begin_size() == whole.shape.num_axes() &&
                  r.end_size() == whole.shape.num_axes();
        for (int a = 0; ok && a < whole.shape.num_axes(); ++a) {
          ok = r.begin(a) >= 0 && r.end(a) <= whole.shape.dim(a) && r.end(a) - r.begin(a) == part.shape.dim(a);
        }
        if (!ok) return error("region ", k, " does not match part ", part.ToString(), " of ", whole.ToString());
        begins.emplace_back(r.begin().begin(), r.begin().end());
      }
      if (on_device) {
        ASSIGN_OR_RETURN(setup.body, MakeDeviceBoxingBody(task, device_task, std::move(begins)));
      } else if (slice) {
        setup.body = std::make_unique<SliceBody>(std::move(begins));
      } else {
        setup.body = std::make_unique<ConcatBody>(std::move(begins));
      }
      break;
    }
    case TaskProto::BOXING_ADD:
      if (spec->payload_outputs.size() != 1 || spec->payload_inputs.empty())
        return error("BOXING_ADD needs inputs and 1 output");
      for (size_t i = 0; i < spec->payload_inputs.size(); ++i) {
        if (in_desc(i) != out_desc(0)) return error("adds ", in_desc(i).ToString(), " into ", out_desc(0).ToString());
      }
      if (on_device) {
        ASSIGN_OR_RETURN(setup.body, MakeDeviceBoxingBody(task, device_task, {}));
      } else {
        setup.body = std::make_unique<AddBody>();
      }
      break;
    case TaskProto::TICK:
      setup.body = std::make_unique<FunctionBody>([](ActIo&) { return absl::OkStatus(); });
      break;
    case TaskProto::REPEAT:
    case TaskProto::ACCUMULATE:
      if (task.count().count() < 1) return error("count ", task.count().count(), " (>= 1 required)");
      RETURN_IF_ERROR(check_pairwise());
      spec->rule = task.type() == TaskProto::REPEAT ? FiringRule::kRepeat : FiringRule::kAccumulate;
      spec->count = task.count().count();
      if (on_device && task.type() == TaskProto::ACCUMULATE) {
        std::vector<TensorDesc> sums;
        for (size_t i = 0; i < spec->payload_inputs.size(); ++i) sums.push_back(in_desc(i));
        ASSIGN_OR_RETURN(setup.body, MakeDeviceAccumulateBody(device_task, sums));
      } else if (on_device) {
        ASSIGN_OR_RETURN(setup.body, device_body(DeviceTask::Kind::kCopy));
      } else {
        setup.body = std::make_unique<CopyBody>();
      }
      break;
    case TaskProto::SOURCE:
    case TaskProto::SINK: {
      const std::string& name = task.io().tensor_name();
      const TensorBindingProto* binding = FindBinding(name);
      if (binding == nullptr) return error("names tensor '", name, "', which has no binding on this rank");
      const bool sink = task.type() == TaskProto::SINK;
      const auto& ids = sink ? task.consumed_register_ids() : task.produced_register_ids();
      auto it = std::find(ids.begin(), ids.end(), binding->slot().register_id());
      if (it == ids.end())
        return error("binding of '", name, "' is in register ", binding->slot().register_id(),
                     ", which the task does not ", sink ? "consume" : "produce");
      const PayloadRef ref{static_cast<int32_t>(it - ids.begin()), binding->slot().slot()};
      if (sink) {
        if (binding->kind() != TensorBindingProto::OUTPUT)
          return error("a SINK needs an OUTPUT binding for '", name, "'");
        spec->rule = FiringRule::kSink;
        spec->payload_inputs = {ref};
        setup.step_events = firings_per_step;
        fetches_per_step_[name] += firings_per_step;
        const int32_t input_device = DeviceOf(binding->slot().register_id());
        setup.body = std::make_unique<FunctionBody>([this, name, input_device](ActIo& io) {
          Tensor fetched = input_device >= 0 ? Tensor(io.inputs[0].desc()) : io.inputs[0].Clone();
          if (input_device >= 0) {
            RETURN_IF_ERROR(env_.device_backend->CopyToHost(input_device, static_cast<const char*>(io.inputs[0].raw_data()),
                                                            fetched.raw_data(), fetched.byte_size()));
          }
          std::lock_guard<std::mutex> lock(io_mu_);
          fetched_[name].push_back(std::move(fetched));
          return absl::OkStatus();
        });
      } else if (binding->kind() == TensorBindingProto::INPUT) {
        if (!spec->inputs.empty()) return error("a SOURCE of input '", name, "' consumes registers");
        spec->rule = FiringRule::kInputSource;
        spec->payload_outputs = {ref};
        setup.step_events = firings_per_step;
        const int32_t output_device = DeviceOf(binding->slot().register_id());
        setup.body = std::make_unique<FunctionBody>([this, name, output_device](ActIo& io) -> absl::Status {
          Tensor shard;
          {
            std::lock_guard<std::mutex> lock(io_mu_);
            std::deque<Tensor>& queue = feeds_[name];
            if (queue.empty())
              return absl::FailedPreconditionError(absl::StrCat("input '", name, "' has no fed tensor for this piece"));
            shard = std::move(queue.front());
            queue.pop_front();
          }
          if (output_device >= 0) {
            return env_.device_backend->CopyToDevice(output_device, shard.raw_data(), static_cast<char*>(io.outputs[0].raw_data()),
                                                     shard.byte_size());
          }
          CopyTensorData(shard, &io.outputs[0]);
          return absl::OkStatus();
        });
      } else if (binding->kind() == TensorBindingProto::VARIABLE) {
        if (spec->outputs[ref.port].layout->count != 1) {
          return error("the register of variable '", name, "' has count ", spec->outputs[ref.port].layout->count,
                       "; a variable holder's register must have count 1");
        }
        spec->rule = FiringRule::kVariableHolder;
        spec->payload_outputs = {ref};
        if (spec->payload_inputs.size() > 1)
          return error("variable holder of '", name, "' consumes ", spec->payload_inputs.size(),
                       " payloads (1 update expected)");
        if (spec->payload_inputs.size() == 1 && in_desc(0) != out_desc(0))
          return error("update ", in_desc(0).ToString(), " for variable ", out_desc(0).ToString());
        for (InputPort& in : spec->inputs) in.back_edge = true;
        setup.step_events = 1 + (spec->inputs.empty() ? 0 : 1);
        if (on_device) {
          // Finishes at once when there is nothing to copy (holder_body.h): no drain of the
          // stream before each read of a weight.
          ASSIGN_OR_RETURN(std::unique_ptr<ActBody> copy, device_body(DeviceTask::Kind::kCopy));
          setup.body = std::make_unique<HolderDeviceBody>(std::move(copy));
        } else {
          setup.body = std::make_unique<CopyBody>();
        }
      } else {
        return error("a SOURCE cannot emit output '", name, "'");
      }
      break;
    }
    case TaskProto::COPY:
      // Host <-> device: each payload input copied into the output of the same desc, on the
      // task's own stream (a copy stream: its own thread here; a device's H2D / D2H stream
      // where the device is asynchronous). Between host buffers it is a plain copy.
      if (spec->payload_inputs.empty()) return error("a COPY has no payload to copy");
      RETURN_IF_ERROR(check_pairwise());
      if (!IsHost(task.copy().from()) || !IsHost(task.copy().to())) {
        const bool from_host = IsHost(task.copy().from()), to_host = IsHost(task.copy().to());
        const DeviceProto& accelerator = from_host ? task.copy().to() : task.copy().from();
        if (env_.device_backend == nullptr || env_.device_backend->type() != accelerator.type()) {
          return error("copies ", from_host ? "to" : "from", " device '", accelerator.type(),
                       "', which this runtime has no backend for (RuntimeEnv.device_backend)");
        }
        device_task.device = accelerator.index();
        ASSIGN_OR_RETURN(setup.body, device_body(from_host   ? DeviceTask::Kind::kHostToDevice
                                                 : to_host ? DeviceTask::Kind::kDeviceToHost
                                                           : DeviceTask::Kind::kCopy));
        break;
      }
      setup.body = std::make_unique<CopyBody>();
      break;
    case TaskProto::COLLECTIVE: {
      if (env_.collectives == nullptr) {
        return error("a COLLECTIVE task needs a collective backend (RuntimeEnv::collectives; gloo on CPU)");
      }
      const CollectiveParams& params = task.collective();
      // One input and one output; a bucket one per part (+ the staging slot of a REDUCE_SCATTER).
      const size_t parts = std::max(1, params.parts_size());
      const size_t outputs = parts + (params.parts_size() > 0 && params.kind() == CollectiveParams::REDUCE_SCATTER);
      if (spec->payload_inputs.size() != parts || spec->payload_outputs.size() != outputs) {
        return error("a COLLECTIVE member ", params.parts_size() > 0 ? "of a bucket " : "", "has ", parts,
                     " payload input(s) and ", outputs, " payload output(s), not ", spec->payload_inputs.size(),
                     " and ", spec->payload_outputs.size());
      }
      auto me = std::find(params.ranks().begin(), params.ranks().end(), rank_.value());
      if (me == params.ranks().end()) return error("this rank is not in the collective's group");
      const std::string memory = on_device ? task.device().type() : "cpu";
      if (env_.collectives->memory_type() != memory) {
        return error("a COLLECTIVE on ", memory, " memory, but the collective backend '", env_.collectives->name(),
                     "' works on ", env_.collectives->memory_type(), " memory",
                     on_device ? " (cuda placements need NCCL: oltrain_cuda)" : "");
      }
      auto body = std::make_unique<CollectiveBody>(env_.collectives, params,
                                                   static_cast<int32_t>(me - params.ranks().begin()), task.name());
      if (on_device) body->UseDeviceMemory(env_.device_backend, task.device().index());
      if (collective_order_ != nullptr) body->UseOrder(collective_order_.get(), collective_call_.at(task.id()));
      setup.body = std::move(body);
      break;
    }
    default:
      return error("unknown task type ", task.type());
  }
  return setup;
}

}  // namespace actor
}  // namespace oneflow_like
