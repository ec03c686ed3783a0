// pybind11 module `oneflow_like._C`: type conversions only; the work is in bridge.h.
// Errors: absl::Status -> ValueError (InvalidArgument, NotFound, AlreadyExists, OutOfRange,
// FailedPrecondition: the user's input) or RuntimeError (the rest), with the C++ message.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstring>

#include "oneflow_like/core/initializer.h"
#include "oneflow_like/core/shard_simulator.h"
#include "python/ext/bridge.h"

namespace py = pybind11;

namespace oneflow_like {
namespace python {
namespace {

[[noreturn]] void Raise(const absl::Status& status) {
  std::string message(status.message());
  switch (status.code()) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kNotFound:
    case absl::StatusCode::kAlreadyExists:
    case absl::StatusCode::kOutOfRange:
    case absl::StatusCode::kFailedPrecondition:
      throw py::value_error(message);
    default:
      throw std::runtime_error(absl::StatusCodeToString(status.code()) + ": " + message);
  }
}
void Check(const absl::Status& status) {
  if (!status.ok()) Raise(status);
}
template <typename T>
T Take(absl::StatusOr<T> value) {
  if (!value.ok()) Raise(value.status());
  return *std::move(value);
}

DataType DtypeOf(const py::dtype& dt) {
  if (dt.is(py::dtype::of<float>())) return DataType::kFloat32;
  if (dt.is(py::dtype::of<double>())) return DataType::kFloat64;
  if (dt.is(py::dtype::of<int32_t>())) return DataType::kInt32;
  if (dt.is(py::dtype::of<int64_t>())) return DataType::kInt64;
  if (dt.is(py::dtype::of<bool>())) return DataType::kBool;
  throw py::value_error("unsupported numpy dtype " + py::cast<std::string>(py::repr(py::handle(dt))) +
                        " (oneflow_like takes float32, float64, int32, int64, bool)");
}

py::dtype NumpyDtype(DataType dt) {
  switch (dt) {
    case DataType::kFloat32: return py::dtype::of<float>();
    case DataType::kFloat64: return py::dtype::of<double>();
    case DataType::kInt32: return py::dtype::of<int32_t>();
    case DataType::kInt64: return py::dtype::of<int64_t>();
    case DataType::kBool: return py::dtype::of<bool>();
    default: throw py::value_error("dtype " + DataTypeName(dt) + " has no numpy equivalent");
  }
}

// A copy of `array` (C-contiguous) as a Tensor.
Tensor FromNumpy(const py::array& array) {
  py::array c = py::array::ensure(array, py::array::c_style | py::array::forcecast);
  DataType dt = DtypeOf(c.dtype());
  std::vector<int64_t> dims(c.shape(), c.shape() + c.ndim());
  Tensor t(dt, Shape(dims));
  if (t.byte_size() > 0) std::memcpy(t.raw_data(), c.data(), static_cast<size_t>(t.byte_size()));
  return t;
}

// The tensor's bytes as a numpy array, without a copy (the array keeps the Tensor alive).
py::array ToNumpy(Tensor tensor) {
  auto* owner = new Tensor(std::move(tensor));
  py::capsule keep(owner, [](void* p) { delete static_cast<Tensor*>(p); });
  std::vector<py::ssize_t> shape(owner->shape().dims().begin(), owner->shape().dims().end());
  if (owner->raw_data() == nullptr) {  // empty tensor
    return py::array(NumpyDtype(owner->dtype()), shape);
  }
  return py::array(NumpyDtype(owner->dtype()), shape, {}, owner->raw_data(), keep);
}

NdSbp ParseNd(const std::string& text) { return Take(NdSbp::Parse(text)); }

std::vector<int64_t> Hierarchy(const std::vector<int64_t>& h) { return h; }

py::dict BindingDict(const TensorBindingProto& b) {
  py::dict d;
  d["kind"] = TensorBindingProto::Kind_Name(b.kind());
  d["nd_sbp"] = Take(NdSbp::FromProto(b.shard().nd_sbp())).ToString();
  d["logical_shape"] = std::vector<int64_t>(b.shard().logical_dims().begin(), b.shard().logical_dims().end());
  d["offset"] = std::vector<int64_t>(b.shard().offset().begin(), b.shard().offset().end());
  d["hierarchy"] = std::vector<int64_t>(b.shard().hierarchy().begin(), b.shard().hierarchy().end());
  d["mesh_coords"] = std::vector<int64_t>(b.shard().mesh_coords().begin(), b.shard().mesh_coords().end());
  return d;
}

}  // namespace

PYBIND11_MODULE(_C, m) {
  m.doc() = "oneflow_like C++ core: compiler, runtime, checkpoints (use `import oneflow_like as ol`)";

  // A compiled plan: the whole plan, or (under olrun) this process's rank's, with the job's facts.
  py::class_<CompiledPlan>(m, "Plan")
      .def_property_readonly("hash", [](const CompiledPlan& p) { return p.plan.content_hash(); })
      .def_property_readonly("job_name", [](const CompiledPlan& p) { return p.plan.job_name(); })
      .def_property_readonly("world_size", [](const CompiledPlan& p) { return p.plan.world_size(); })
      // The job's ranks with work (every rank's, also in a per-rank plan).
      .def_property_readonly("ranks", &CompiledPlan::job_ranks)
      .def_property_readonly("per_rank", &CompiledPlan::per_rank)
      // The rank a per-rank plan lowered; -1 for the whole plan.
      .def_property_readonly("rank", [](const CompiledPlan& p) { return p.per_rank() ? p.plan.per_rank().rank() : -1; })
      // The ranks this plan lowered (all of `ranks` for the whole plan; {rank} or none per rank).
      .def_property_readonly("lowered_ranks", [](const CompiledPlan& p) {
        return std::vector<int32_t>(p.plan.ranks().begin(), p.plan.ranks().end());
      })
      // Job agreement of a per-rank plan (what the ranks compare), {} for the whole plan.
      .def_property_readonly("agreement", [](const CompiledPlan& p) {
        py::dict d;
        if (!p.per_rank()) return d;
        const JobAgreementProto& a = p.plan.per_rank().agreement();
        d["digest"] = a.digest();
        d["world_size"] = a.world_size();
        d["ops"] = a.num_ops();
        d["variables"] = a.num_variables();
        d["parameters"] = a.num_parameters();
        d["pieces_per_step"] = a.pieces_per_step();
        d["stages"] = a.num_stages();
        return d;
      })
      .def_property_readonly("pieces_per_step", [](const CompiledPlan& p) { return std::max<int64_t>(1, p.plan.pieces_per_step()); })
      // Tasks and planned bytes of the lowered ranks.
      .def_property_readonly("num_tasks", [](const CompiledPlan& p) {
        int64_t n = 0;
        for (const RankPlanProto& r : p.plan.rank_plans()) n += r.tasks_size();
        return n;
      })
      .def_property_readonly("planned_bytes", [](const CompiledPlan& p) {
        std::map<int32_t, int64_t> out;
        for (const RankMemoryProto& r : p.plan.memory()) out[r.rank()] = r.planned_bytes();
        return out;
      })
      .def("sbp_decisions", [](const CompiledPlan& p) { return DescribeSbp(p.plan); })
      .def("serialize", [](const CompiledPlan& p) { return py::bytes(p.plan.SerializeAsString()); })
      .def("debug_string", [](const CompiledPlan& p) { return p.plan.DebugString(); });

  py::class_<Runner>(m, "Runner")
      .def_property_readonly("local_ranks", &Runner::local_ranks)
      .def_property_readonly("pieces_per_step", &Runner::pieces_per_step)
      .def_property_readonly("plan", [](const Runner& r) -> const CompiledPlan& { return r.compiled(); },
                             py::return_value_policy::reference_internal)
      .def("holds", &Runner::Holds)
      .def("binding", [](const Runner& r, const std::string& name, int32_t rank) -> py::object {
        const TensorBindingProto* b = r.Binding(name, rank);
        if (b == nullptr) return py::none();
        return BindingDict(*b);
      })
      .def("feed_shard", [](Runner& r, const std::string& name, int32_t rank, const py::array& a) {
        Tensor t = FromNumpy(a);
        py::gil_scoped_release release;
        Check(r.FeedShard(name, rank, t));
      })
      .def("run_step", [](Runner& r) {
        absl::Status s;
        {
          py::gil_scoped_release release;
          s = r.RunStep();
        }
        Check(s);
      })
      .def("fetch_shards", [](Runner& r, const std::string& name, int32_t rank) {
        std::vector<Tensor> shards = Take(r.FetchShards(name, rank));
        py::list out;
        for (Tensor& t : shards) out.append(ToNumpy(std::move(t)));
        return out;
      })
      .def("read_variable_shard", [](const Runner& r, const std::string& name, int32_t rank) {
        return ToNumpy(Take(r.ReadVariableShard(name, rank)));
      })
      .def("write_variable_shard", [](Runner& r, const std::string& name, int32_t rank, const py::array& a) {
        Check(r.WriteVariableShard(name, rank, FromNumpy(a)));
      })
      .def("save", [](Runner& r, const std::string& dir, int64_t step) {
        py::gil_scoped_release release;
        Check(r.Save(dir, step));
      })
      .def("load", [](Runner& r, const std::string& dir) {
        py::gil_scoped_release release;
        return Take(r.Load(dir));
      })
      .def("close", [](Runner& r) {
        absl::Status s;
        {
          py::gil_scoped_release release;
          s = r.Close();
        }
        Check(s);
      });

  py::class_<Engine>(m, "Engine")
      .def(py::init<bool>(), py::arg("use_launcher_env") = true)
      .def("op_types", &Engine::OpTypes)
      .def("infer", [](const Engine& e, const std::string& text) {
        std::vector<TensorInfo> infos = Take(e.Infer(text));
        py::dict out;
        for (const TensorInfo& t : infos) {
          out[py::str(t.name)] = py::make_tuple(t.shape, t.dtype, t.placement, t.nd_sbp);
        }
        return out;
      })
      .def("compile", [](const Engine& e, const std::string& text, int32_t world_size,
                         const std::vector<std::string>& gradients_of, bool gradients_only, bool whole_plan) {
        CompileRequest request;
        request.whole_plan = whole_plan;
        request.text = text;
        request.world_size = world_size;
        request.gradients_of = gradients_of;
        request.gradients_only = gradients_only;
        py::gil_scoped_release release;
        return Take(e.Compile(request));
      }, py::arg("text"), py::arg("world_size") = 0, py::arg("gradients_of") = std::vector<std::string>{},
         py::arg("gradients_only") = false, py::arg("whole_plan") = false)
      .def_property_readonly("distributed", &Engine::distributed)
      .def_property_readonly("rank", &Engine::rank)
      .def_property_readonly("world_size", &Engine::world_size)
      .def_property_readonly("local_rank", &Engine::local_rank)
      .def("join", [](Engine& e) {
        py::gil_scoped_release release;
        Check(e.EnsureJoined());
      })
      .def("barrier", [](Engine& e, const std::string& what) {
        py::gil_scoped_release release;
        Check(e.Barrier(what));
      })
      .def("all_gather", [](Engine& e, const py::bytes& value) {
        std::string v = value;
        std::vector<std::string> out;
        {
          py::gil_scoped_release release;
          out = Take(e.AllGather(v));
        }
        py::list l;
        for (const std::string& s : out) l.append(py::bytes(s));
        return l;
      })
      .def("shutdown", [](Engine& e) {
        py::gil_scoped_release release;
        Check(e.Shutdown());
      })
      .def("abort", &Engine::Abort)
      .def("new_runner", [](Engine& e, const CompiledPlan& plan) {
        std::unique_ptr<Runner> r;
        {
          py::gil_scoped_release release;
          r = Take(e.NewRunner(plan));
        }
        return r;
      }, py::keep_alive<0, 1>());

  // The shard of parallel id `index`: (physical shape, offset in the logical tensor).
  m.def("shard_slice", [](const std::vector<int64_t>& shape, const std::string& nd, const std::vector<int64_t>& hierarchy,
                          int64_t index) {
    ShardSlice slice = GetShardSlice(Shape(shape), ParseNd(nd), hierarchy, index);
    return py::make_tuple(slice.shape.dims(), slice.offset);
  });
  m.def("checkpoint_variables", [](const std::string& dir) { return Take(CheckpointVariables(dir)); });
  m.def("check_placement", [](const std::string& text) {
    Placement p = Take(Placement::Parse(text));
    std::vector<int32_t> ranks;
    for (Rank r : p.ranks()) ranks.push_back(static_cast<int32_t>(r.value()));
    return py::make_tuple(p.ToString(), ranks, p.hierarchy());
  });
  m.def("check_nd_sbp", [](const std::string& text) { return ParseNd(text).ToString(); });
  // allow_empty_shards=false: as the compiler, which refuses splits with more parts than elements.
  m.def("validate_nd_sbp", [](const std::string& nd, const std::vector<int64_t>& shape, const std::string& placement,
                              bool allow_empty_shards) {
    Placement p = Take(Placement::Parse(placement));
    Check(ValidateNdSbp(ParseNd(nd), Shape(shape), p, allow_empty_shards));
  }, py::arg("nd"), py::arg("shape"), py::arg("placement"), py::arg("allow_empty_shards") = true);
  // Logical array -> one shard per device of the mesh (parallel-id order).
  m.def("shard", [](const py::array& logical, const std::string& nd, const std::vector<int64_t>& hierarchy) {
    std::vector<Tensor> shards = Take(ShardTensor(FromNumpy(logical), ParseNd(nd), Hierarchy(hierarchy)));
    py::list out;
    for (Tensor& t : shards) out.append(ToNumpy(std::move(t)));
    return out;
  });
  m.def("assemble", [](const std::vector<py::array>& shards, const std::vector<int64_t>& shape, const std::string& nd,
                       const std::vector<int64_t>& hierarchy) {
    std::vector<Tensor> ts;
    for (const py::array& a : shards) ts.push_back(FromNumpy(a));
    return ToNumpy(Take(AssembleTensor(ts, Shape(shape), ParseNd(nd), Hierarchy(hierarchy), 1e-6)));
  });
  // One shard [offset, offset + shard_shape) of a logical tensor filled by an initializer:
  // the values do not depend on the layout (core/initializer.h).
  m.def("init_shard", [](const std::string& kind, const std::vector<int64_t>& logical_shape,
                         const std::vector<int64_t>& offset, const std::vector<int64_t>& shard_shape,
                         const std::string& dtype, double a, double b, uint64_t seed) {
    InitializerProto init;
    if (kind == "zeros") init.set_kind(InitializerProto::ZEROS);
    else if (kind == "ones") init.set_kind(InitializerProto::ONES);
    else if (kind == "constant") { init.set_kind(InitializerProto::CONSTANT); init.set_value(a); }
    else if (kind == "uniform") { init.set_kind(InitializerProto::UNIFORM); init.set_low(a); init.set_high(b); }
    else if (kind == "normal") { init.set_kind(InitializerProto::NORMAL); init.set_mean(a); init.set_stddev(b); }
    else throw py::value_error("unknown initializer '" + kind + "'");
    init.set_seed(seed);
    Tensor t(Take(ParseDataType(dtype)), Shape(shard_shape));
    Check(InitializeShard(init, Shape(logical_shape), offset, &t));
    return ToNumpy(std::move(t));
  });
}

}  // namespace python
}  // namespace oneflow_like
