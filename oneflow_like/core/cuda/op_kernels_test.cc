// The CUDA kernel table (op_kernels.h) against the CPU ops.
//
// Without a GPU (plain TESTs, they always run): the table covers every op RegisterBuiltinOps
// registers, Add refuses a second kernel, every op has a GPU comparison below (kTestedOps), and
// bad attributes / arities fail with InvalidArgument naming the op and instance before anything
// reaches the device (the tensors there have null data).
//
// With a GPU (OpKernelsTest, skips without one): every op runs through table.Find(op) on random
// inputs, uploaded to the device, and its outputs are compared with cpu().RunOk on the same
// inputs (tolerances of cuda_test_util.h; copies, casts, fills, uniform random numbers and dropout
// exactly), forward and backward ops, float32 and float64, odd shapes, attributes that exercise
// transposes, axes, keepdims, causal masks and shards (ShardInfo: cpu().RunShard is the reference).
// Without a GPU, OL_CUDA_DRY_RUN=1 runs them as far as a machine without one can (SetUp below):
//   tools/bazel.sh test //oneflow_like/core/cuda:cuda_kernels_test --test_env=OL_CUDA_DRY_RUN=1
#include <cstdlib>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "oneflow_like/core/cuda/cuda_test_util.h"
#include "oneflow_like/core/cuda/op_kernels.h"
#include "oneflow_like/core/ops/builtin_ops.h"

namespace oneflow_like {
namespace cuda {
namespace testing {
namespace {

using ::oneflow_like::testing::RandomTensor;

// Every op the GPU tests below compare with the CPU (Check / CheckShard refuse any other op).
std::set<std::string> TestedOps() {
  return {
      "matmul", "matmul_batch_sum", "add", "sub", "mul", "div", "scalar_add", "scalar_mul", "bias_add", "relu",
      "relu_grad", "gelu", "gelu_grad", "reduce_sum", "reduce_mean", "broadcast_to", "softmax", "log_softmax",
      "softmax_grad", "log_softmax_grad", "layer_norm", "layer_norm_grad", "embedding", "embedding_grad",
      "sparse_softmax_cross_entropy", "sparse_softmax_cross_entropy_grad", "reshape", "identity", "transpose",
      "slice", "slice_grad", "concat", "split", "cast", "fill", "random_uniform", "random_normal", "dropout",
      "dropout_grad", "sgd_update", "sgd_plain_update", "adam_update", "step_increment"};
}

// ---- without a GPU ----

TEST(CudaKernelTableTest, CoversEveryBuiltinOp) {
  OpRegistry registry;
  ASSERT_OK(RegisterBuiltinOps(&registry));
  CudaKernelTable table;
  EXPECT_EQ(table.Missing(registry), registry.Names());  // empty table: everything is missing
  ASSERT_OK(AddCudaKernels(&table));
  EXPECT_TRUE(table.Missing(registry).empty()) << "ops without a CUDA kernel: " << table.Missing(registry).size();
  for (const std::string& op : table.Missing(registry)) ADD_FAILURE() << "no CUDA kernel: " << op;
  EXPECT_NE(table.Find("matmul"), nullptr);
  EXPECT_EQ(table.Find("no_such_op"), nullptr);
}

TEST(CudaKernelTableTest, AddTwiceIsAlreadyExists) {
  CudaKernelTable table;
  ASSERT_OK(AddCudaKernels(&table));
  const absl::Status again = AddCudaKernels(&table);
  EXPECT_EQ(again.code(), absl::StatusCode::kAlreadyExists) << again;
  EXPECT_NE(again.message().find("matmul"), absl::string_view::npos) << again;
  const absl::Status one = table.Add("relu", [](const CudaKernelContext&) { return absl::OkStatus(); });
  EXPECT_EQ(one.code(), absl::StatusCode::kAlreadyExists) << one;
  EXPECT_EQ(table.Add("my_op", CudaKernelFn()).code(), absl::StatusCode::kInvalidArgument);
}

TEST(CudaKernelTableTest, EveryOpHasAGpuComparison) {
  OpRegistry registry;
  ASSERT_OK(RegisterBuiltinOps(&registry));
  for (const std::string& op : registry.Names()) {
    EXPECT_EQ(TestedOps().count(op), 1u) << op << " has no GPU comparison in op_kernels_test.cc";
  }
}

// Runs `op`'s CUDA kernel on tensors that have descs but no data (null device pointers): only
// for calls that must fail in the argument checks, before any launch.
absl::Status RunWithoutData(const std::string& op, const std::vector<TensorDesc>& inputs, const AttrMap& attrs,
                            const std::vector<TensorDesc>& outputs) {
  OpRegistry registry;
  RETURN_IF_ERROR(RegisterBuiltinOps(&registry));
  ASSIGN_OR_RETURN(const OpDef* def, registry.Get(op));
  const std::string name = "net." + op;
  ASSIGN_OR_RETURN(const AttrMap validated, def->ValidateAttrs(name, attrs));
  CudaKernelTable table;
  RETURN_IF_ERROR(AddCudaKernels(&table));
  std::vector<Tensor> in, out;
  for (const TensorDesc& d : inputs) in.push_back(Tensor::Borrow(d, nullptr));
  for (const TensorDesc& d : outputs) out.push_back(Tensor::Borrow(d, nullptr));
  CudaKernelContext ctx{name, validated};
  for (const Tensor& t : in) ctx.inputs.push_back(&t);
  for (Tensor& t : out) ctx.outputs.push_back(&t);
  return (*table.Find(op))(ctx);
}

void ExpectFails(const absl::Status& status, const std::string& op, const std::string& fragment) {
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  const std::string message(status.message());
  EXPECT_NE(message.find(op + " 'net." + op + "'"), std::string::npos) << "op and instance not named: " << status;
  EXPECT_NE(message.find(fragment), std::string::npos) << "no '" << fragment << "' in: " << status;
}

TEST(CudaKernelTableTest, BadAttrsAndShapesAreInvalidArgument) {
  const TensorDesc f35{DataType::kFloat32, Shape({3, 5})};
  ExpectFails(RunWithoutData("gelu", {f35}, {{"approximate", std::string("fast")}}, {f35}), "gelu",
              "approximate must be \"tanh\" or \"none\"");
  ExpectFails(RunWithoutData("gelu_grad", {f35, f35}, {{"approximate", std::string("erf")}}, {f35}), "gelu_grad",
              "\"erf\"");
  ExpectFails(RunWithoutData("reduce_sum", {f35}, {{"axes", std::vector<int64_t>{2}}}, {f35}), "reduce_sum",
              "axis 2 out of range");
  ExpectFails(RunWithoutData("transpose", {f35}, {{"perm", std::vector<int64_t>{0, 0}}}, {f35}), "transpose",
              "not a permutation");
  const AttrMap bad_slice = {{"begin", std::vector<int64_t>{0, 4}}, {"end", std::vector<int64_t>{3, 2}}};
  ExpectFails(RunWithoutData("slice", {f35}, bad_slice, {f35}), "slice", "out of range");
  ExpectFails(RunWithoutData("dropout", {f35}, {{"p", 1.5}}, {f35}), "dropout", "out of range [0, 1)");
  ExpectFails(RunWithoutData("layer_norm", {f35, {DataType::kFloat32, Shape({5})}, {DataType::kFloat32, Shape({5})}},
                             {{"epsilon", -1.0}},
                             {f35, {DataType::kFloat32, Shape({3})}, {DataType::kFloat32, Shape({3})}}),
              "layer_norm", "epsilon must be >= 0");
  ExpectFails(RunWithoutData("random_normal", {}, {{"shape", std::vector<int64_t>{3, 5}}, {"std", -1.0}}, {f35}),
              "random_normal", "std must be >= 0");
  // Shapes the op cannot take, and wrong arities.
  ExpectFails(RunWithoutData("matmul", {f35, f35}, {}, {f35}), "matmul", "inner dimensions differ");
  ExpectFails(RunWithoutData("add", {f35, {DataType::kFloat32, Shape({4})}}, {}, {f35}), "add", "[3,5]");
  ExpectFails(RunWithoutData("relu", {f35, f35}, {}, {f35}), "relu", "got 2 inputs, expected 1");
  ExpectFails(RunWithoutData("relu", {{DataType::kInt32, Shape({3, 5})}}, {}, {{DataType::kInt32, Shape({3, 5})}}),
              "relu", "unsupported dtype int32");
  ExpectFails(RunWithoutData("scalar_mul", {f35}, {{"value", 2.0}}, {{DataType::kFloat32, Shape({5, 3})}}),
              "scalar_mul", "output y is float32[5,3], expected float32[3,5]");
}

// ---- with a GPU ----

class OpKernelsTest : public CudaKernelTest {
 protected:
  enum class Compare { kExact, kElementwise, kReduction };

  // OL_CUDA_DRY_RUN=1 without a GPU: instead of skipping, every comparison runs the CPU op and
  // calls the table's kernel on tensors without data (nothing is compared). The kernel must get
  // past its own argument checks (attrs, descs, shards): any InvalidArgument but a failed CUDA
  // call's fails the test; launch failures (no driver) are expected.
  void SetUp() override {
    ASSERT_OK(AddCudaKernels(&table_));
    const char* dry = std::getenv("OL_CUDA_DRY_RUN");
    const absl::StatusOr<int> devices = DeviceCount();
    if (dry != nullptr && std::string(dry) == "1" && (!devices.ok() || *devices == 0)) {
      dry_ = true;
      return;
    }
    CudaKernelTest::SetUp();
  }

  // The dry run of RunCuda: the kernel on data-less tensors; no outputs.
  absl::StatusOr<std::vector<Tensor>> RunDry(const std::string& name, const AttrMap& attrs, const CudaKernelFn& kernel,
                                             const std::vector<Tensor>& inputs,
                                             const std::vector<TensorDesc>& output_descs,
                                             const std::vector<ShardInfo>& input_shards,
                                             const std::vector<ShardInfo>& output_shards) {
    std::vector<Tensor> in, out;
    for (const Tensor& t : inputs) in.push_back(Tensor::Borrow(t.desc(), nullptr));
    for (const TensorDesc& d : output_descs) out.push_back(Tensor::Borrow(d, nullptr));
    CudaKernelContext ctx{name, attrs};
    for (const Tensor& t : in) ctx.inputs.push_back(&t);
    for (Tensor& t : out) ctx.outputs.push_back(&t);
    ctx.input_shards = input_shards;
    ctx.output_shards = output_shards;
    const absl::Status status = kernel(ctx);
    if (status.code() == absl::StatusCode::kInvalidArgument &&
        std::string(status.message()).find(" failed: ") == std::string::npos) {
      return status;
    }
    return std::vector<Tensor>{};
  }

  // `op` through the table on device copies of `inputs`; outputs of `output_descs`, downloaded.
  absl::StatusOr<std::vector<Tensor>> RunCuda(const std::string& op, const std::vector<Tensor>& inputs,
                                              const AttrMap& attrs, const std::vector<TensorDesc>& output_descs,
                                              const std::vector<ShardInfo>& input_shards = {},
                                              const std::vector<ShardInfo>& output_shards = {}) {
    ASSIGN_OR_RETURN(const OpDef* def, cpu().registry().Get(op));
    const std::string name = "test." + op;
    ASSIGN_OR_RETURN(const AttrMap validated, def->ValidateAttrs(name, attrs));
    const CudaKernelFn* kernel = table_.Find(op);
    if (kernel == nullptr) return absl::NotFoundError(absl::StrCat("no CUDA kernel for ", op));
    if (dry_) return RunDry(name, validated, *kernel, inputs, output_descs, input_shards, output_shards);
    std::vector<Tensor> device_inputs, device_outputs;
    for (const Tensor& t : inputs) device_inputs.push_back(Tensor::Borrow(t.desc(), UploadRaw(t)));
    for (const TensorDesc& d : output_descs) device_outputs.push_back(Tensor::Borrow(d, OutputRaw(d.byte_size())));
    CudaKernelContext ctx{name, validated};
    for (const Tensor& t : device_inputs) ctx.inputs.push_back(&t);
    for (Tensor& t : device_outputs) ctx.outputs.push_back(&t);
    ctx.input_shards = input_shards;
    ctx.output_shards = output_shards;
    ctx.stream = stream();
    ctx.cublas = cublas().get();
    ctx.check_indices = check_indices_;
    RETURN_IF_ERROR((*kernel)(ctx));
    std::vector<Tensor> outputs;
    for (const Tensor& t : device_outputs) outputs.push_back(Download(t.raw_data(), t.desc()));
    return outputs;
  }

  static void Expect(const std::vector<Tensor>& got, const std::vector<Tensor>& want, Compare compare,
                     const std::string& what) {
    ASSERT_EQ(got.size(), want.size()) << what;
    for (size_t i = 0; i < want.size(); ++i) {
      const std::string w = absl::StrCat(what, " output ", i);
      const bool floating = want[i].dtype() == DataType::kFloat32 || want[i].dtype() == DataType::kFloat64;
      if (compare == Compare::kExact || !floating) {
        ExpectEqualValues(got[i], want[i], w);
      } else {
        ExpectClose(got[i], want[i], compare == Compare::kElementwise ? Tolerance::kElementwise : Tolerance::kReduction,
                    w);
      }
    }
  }

  // The CPU op on whole tensors vs the table's kernel; returns the CPU outputs.
  std::vector<Tensor> Check(const std::string& op, const std::vector<Tensor>& inputs, const AttrMap& attrs,
                            Compare compare) {
    const std::string what = absl::StrCat(op, " ", attrs.ToString(), " on ", Descs(inputs));
    EXPECT_EQ(TestedOps().count(op), 1u) << op << " is missing from TestedOps()";
    const std::vector<Tensor> want = cpu().RunOk(op, inputs, attrs);
    if (want.empty()) {
      ADD_FAILURE() << "the CPU run failed: " << what;
      return want;
    }
    std::vector<TensorDesc> descs;
    for (const Tensor& t : want) descs.push_back(t.desc());
    absl::StatusOr<std::vector<Tensor>> got = RunCuda(op, inputs, attrs, descs);
    EXPECT_TRUE(got.ok()) << what << ": " << got.status();
    if (got.ok() && !dry_) Expect(*got, want, compare, what);
    return want;
  }

  // One shard: the CPU's RunShard vs the table's kernel with the same ShardInfos.
  void CheckShard(const std::string& op, const std::vector<Tensor>& inputs, const AttrMap& attrs,
                  const std::vector<ShardInfo>& input_shards, const std::vector<TensorDesc>& output_descs,
                  const std::vector<ShardInfo>& output_shards, Compare compare) {
    const std::string what = absl::StrCat(op, " shard ", attrs.ToString(), " on ", Descs(inputs));
    EXPECT_EQ(TestedOps().count(op), 1u) << op << " is missing from TestedOps()";
    absl::StatusOr<std::vector<Tensor>> want =
        cpu().RunShard(op, inputs, attrs, input_shards, output_descs, output_shards);
    ASSERT_OK(want.status());
    absl::StatusOr<std::vector<Tensor>> got = RunCuda(op, inputs, attrs, output_descs, input_shards, output_shards);
    ASSERT_OK(got.status());
    if (!dry_) Expect(*got, *want, compare, what);
  }

  static std::string Descs(const std::vector<Tensor>& tensors) {
    std::string s;
    for (const Tensor& t : tensors) absl::StrAppend(&s, s.empty() ? "" : ", ", t.desc().ToString());
    return s;
  }

  uint64_t NextSeed() { return ++seed_; }
  Tensor Random(DataType dt, const Shape& shape, double low = -1.0, double high = 1.0) {
    return RandomTensor(dt, shape, NextSeed(), low, high);
  }

  CudaKernelTable table_;
  bool dry_ = false;  // OL_CUDA_DRY_RUN without a GPU
  bool check_indices_ = true;  // RunCuda's CudaKernelContext::check_indices
  uint64_t seed_ = 1000;
};

constexpr DataType kFloats[] = {DataType::kFloat32, DataType::kFloat64};

TEST_F(OpKernelsTest, Matmul) {
  for (DataType dt : kFloats) {
    for (bool ta : {false, true}) {
      for (bool tb : {false, true}) {
        const AttrMap attrs = {{"transpose_a", ta}, {"transpose_b", tb}, {"alpha", 0.75}};
        const auto op2 = [&](std::vector<int64_t> batch, int64_t r, int64_t c, bool t) {
          batch.push_back(t ? c : r);
          batch.push_back(t ? r : c);
          return Random(dt, Shape(batch));
        };
        Check("matmul", {op2({}, 5, 3, ta), op2({}, 3, 7, tb)}, attrs, Compare::kReduction);          // 2-D
        Check("matmul", {op2({2, 3}, 4, 9, ta), op2({2, 3}, 9, 5, tb)}, attrs, Compare::kReduction);  // batched
        Check("matmul", {op2({3}, 6, 4, ta), op2({}, 4, 7, tb)}, attrs, Compare::kReduction);         // shared b
        Check("matmul_batch_sum", {op2({4}, 5, 3, ta), op2({4}, 3, 6, tb)}, attrs, Compare::kReduction);
        Check("matmul_batch_sum", {op2({2, 3}, 1, 7, ta), op2({2, 3}, 7, 2, tb)}, attrs, Compare::kReduction);
      }
    }
  }
}

TEST_F(OpKernelsTest, Elementwise) {
  for (DataType dt : kFloats) {
    const std::vector<std::pair<Shape, Shape>> pairs = {
        {Shape({3, 5, 7}), Shape({3, 5, 7})}, {Shape({5, 1, 7}), Shape({3, 1})}, {Shape({4, 6}), Shape({6})},
        {Shape({1}), Shape({2, 3})}};
    for (const auto& [sa, sb] : pairs) {
      for (const char* op : {"add", "sub", "mul"}) {
        Check(op, {Random(dt, sa), Random(dt, sb)}, {}, Compare::kElementwise);
      }
      Check("div", {Random(dt, sa), Random(dt, sb, 0.5, 2.0)}, {}, Compare::kElementwise);
    }
    Check("scalar_add", {Random(dt, Shape({3, 5, 7}))}, {{"value", 0.37}}, Compare::kElementwise);
    Check("scalar_mul", {Random(dt, Shape({17, 33}))}, {{"value", -1.3}}, Compare::kElementwise);
    for (int64_t axis : {0, 1, -1}) {
      const Tensor x = Random(dt, Shape({3, 5, 7}));
      const int64_t c = x.shape().dim(axis < 0 ? 2 : static_cast<int>(axis));
      Check("bias_add", {x, Random(dt, Shape({c}))}, {{"axis", axis}}, Compare::kElementwise);
    }
  }
}

TEST_F(OpKernelsTest, Activations) {
  for (DataType dt : kFloats) {
    const Tensor x = Random(dt, Shape({3, 5, 7}), -4.0, 4.0);
    const Tensor dy = Random(dt, x.shape());
    const std::vector<Tensor> y = Check("relu", {x}, {}, Compare::kElementwise);
    if (!y.empty()) Check("relu_grad", {dy, y[0]}, {}, Compare::kElementwise);
    for (const char* approximate : {"tanh", "none"}) {
      const AttrMap attrs = {{"approximate", std::string(approximate)}};
      Check("gelu", {x}, attrs, Compare::kElementwise);
      Check("gelu_grad", {dy, x}, attrs, Compare::kElementwise);
    }
  }
}

TEST_F(OpKernelsTest, Reductions) {
  const std::vector<std::vector<int64_t>> axes_cases = {{}, {1}, {0, 2}, {-1}, {0}};
  for (DataType dt : {DataType::kFloat32, DataType::kFloat64, DataType::kInt32, DataType::kInt64}) {
    const bool floating = dt == DataType::kFloat32 || dt == DataType::kFloat64;
    const Tensor x = floating ? Random(dt, Shape({3, 5, 7})) : Random(dt, Shape({3, 5, 7}), -50, 50);
    for (const auto& axes : axes_cases) {
      for (bool keepdims : {false, true}) {
        const AttrMap attrs = {{"axes", axes}, {"keepdims", keepdims}};
        Check("reduce_sum", {x}, attrs, floating ? Compare::kReduction : Compare::kExact);
        if (floating) Check("reduce_mean", {x}, attrs, Compare::kReduction);
      }
    }
  }
  // x:S(1) -> y:P: the shard divides by the LOGICAL reduced size.
  const Tensor part = Random(DataType::kFloat32, Shape({3, 2, 7}));
  CheckShard("reduce_mean", {part}, {{"axes", std::vector<int64_t>{1}}},
             {ShardInfo{Shape({3, 5, 7}), {0, 3, 0}}}, {{DataType::kFloat32, Shape({3, 7})}}, {}, Compare::kReduction);
  for (DataType dt : kFloats) {
    Check("broadcast_to", {Random(dt, Shape({5, 1}))}, {{"shape", std::vector<int64_t>{4, 5, 3}}}, Compare::kExact);
    Check("broadcast_to", {Random(dt, Shape({7}))}, {{"shape", std::vector<int64_t>{2, 3, 7}}}, Compare::kExact);
  }
}

TEST_F(OpKernelsTest, Softmax) {
  for (DataType dt : kFloats) {
    for (const Shape& shape : {Shape({3, 5, 7}), Shape({2, 9, 9}), Shape({4, 1500}), Shape({1, 1})}) {
      for (bool log : {false, true}) {
        for (bool causal : {false, true}) {
          const AttrMap attrs = {{"causal", causal}};
          const std::vector<Tensor> y = Check(log ? "log_softmax" : "softmax", {Random(dt, shape, -5, 5)}, attrs,
                                              Compare::kReduction);
          if (y.empty()) continue;
          Check(log ? "log_softmax_grad" : "softmax_grad", {y[0], Random(dt, shape)}, attrs, Compare::kReduction);
        }
      }
    }
  }
  // Query rows 3..6 of a causal [2, 12, 9]: the mask uses logical query indices.
  const Tensor x = Random(DataType::kFloat32, Shape({2, 4, 9}));
  const ShardInfo shard{Shape({2, 12, 9}), {0, 3, 0}};
  CheckShard("softmax", {x}, {{"causal", true}}, {shard}, {x.desc()}, {shard}, Compare::kReduction);
  CheckShard("log_softmax_grad", {Random(DataType::kFloat32, x.shape(), -3, 0), Random(DataType::kFloat32, x.shape())},
             {{"causal", true}}, {shard, shard}, {x.desc()}, {shard}, Compare::kReduction);
}

TEST_F(OpKernelsTest, LayerNorm) {
  for (DataType dt : kFloats) {
    for (const Shape& shape : {Shape({6, 33}), Shape({2, 3, 5}), Shape({1, 1}), Shape({3, 1030})}) {
      const int64_t d = shape.dim(shape.num_axes() - 1);
      const Tensor x = Random(dt, shape, -2.0, 3.0);
      const Tensor gamma = Random(dt, Shape({d})), beta = Random(dt, Shape({d}));
      const std::vector<Tensor> fwd = Check("layer_norm", {x, gamma, beta}, {{"epsilon", 1e-3}}, Compare::kReduction);
      if (fwd.size() != 3) continue;
      Check("layer_norm_grad", {Random(dt, shape), x, fwd[1], fwd[2], gamma}, {}, Compare::kReduction);
    }
  }
}

TEST_F(OpKernelsTest, Embedding) {
  for (DataType dt : kFloats) {
    for (DataType it : {DataType::kInt32, DataType::kInt64}) {
      const Tensor table = Random(dt, Shape({11, 7}));
      const Tensor ids = Random(it, Shape({3, 5}), 0, 11);
      Check("embedding", {table, ids}, {}, Compare::kElementwise);
      Check("embedding_grad", {Random(dt, Shape({3, 5, 7})), ids}, {{"num_embeddings", int64_t{11}}},
            Compare::kReduction);
    }
  }
  // Vocab-parallel: rows [4, 8) of an [11, 7] table.
  const Tensor table = Random(DataType::kFloat32, Shape({4, 7}));
  const Tensor ids = Random(DataType::kInt64, Shape({3, 5}), 0, 11);
  const ShardInfo rows{Shape({11, 7}), {4, 0}};
  const TensorDesc y_desc{DataType::kFloat32, Shape({3, 5, 7})};
  CheckShard("embedding", {table, ids}, {}, {rows, ShardInfo::Whole(ids.shape())}, {y_desc}, {}, Compare::kElementwise);
  CheckShard("embedding_grad", {Random(DataType::kFloat32, Shape({3, 5, 7})), ids}, {{"num_embeddings", int64_t{11}}},
             {}, {table.desc()}, {rows}, Compare::kReduction);
}

TEST_F(OpKernelsTest, CrossEntropy) {
  for (DataType dt : kFloats) {
    for (DataType it : {DataType::kInt32, DataType::kInt64}) {
      for (const Shape& labels_shape : {Shape({6}), Shape({2, 3}), Shape({1})}) {
        std::vector<int64_t> dims = labels_shape.dims();
        dims.push_back(10);
        const Tensor logits = Random(dt, Shape(dims), -3, 3);
        const Tensor labels = Random(it, labels_shape, 0, 10);
        Check("sparse_softmax_cross_entropy", {logits, labels}, {}, Compare::kReduction);
        Check("sparse_softmax_cross_entropy_grad", {logits, labels, Random(dt, Shape({}), 0.5, 2.0)}, {},
              Compare::kReduction);
      }
    }
  }
  // Rows 2..4 of 8: divided by the logical N = 8.
  const Tensor logits = Random(DataType::kFloat32, Shape({3, 10}));
  const Tensor labels = Random(DataType::kInt64, Shape({3}), 0, 10);
  const std::vector<ShardInfo> shards = {{Shape({8, 10}), {2, 0}}, {Shape({8}), {2}}};
  CheckShard("sparse_softmax_cross_entropy", {logits, labels}, {}, shards, {{DataType::kFloat32, Shape({})}}, {},
             Compare::kReduction);
  const Tensor dloss = Random(DataType::kFloat32, Shape({}), 0.5, 2.0);
  CheckShard("sparse_softmax_cross_entropy_grad", {logits, labels, dloss}, {},
             {shards[0], shards[1], ShardInfo::Whole(Shape({}))}, {logits.desc()}, {shards[0]}, Compare::kReduction);
}

// An id outside [0, V) or a label outside [0, C) fails on the GPU as on the CPU (InvalidArgument
// naming the value, its position and the range), in the forward and backward kernels, also for a
// vocab shard (ids are checked against the LOGICAL V); unchecked (check_indices = false) the
// kernels run and say nothing.
TEST_F(OpKernelsTest, OutOfRangeIdsAndLabelsFailAsOnTheCpu) {
  // Dry run: the CPU half only (the index check reads device memory back).
  auto expect_both_fail = [&](const std::string& op, const std::vector<Tensor>& inputs, const AttrMap& attrs,
                              const std::vector<TensorDesc>& descs, const std::vector<ShardInfo>& input_shards,
                              const std::vector<ShardInfo>& output_shards, const std::string& fragment) {
    const absl::StatusOr<std::vector<Tensor>> want =
        cpu().RunShard(op, inputs, attrs, input_shards, descs, output_shards);
    EXPECT_EQ(want.status().code(), absl::StatusCode::kInvalidArgument) << op << ": " << want.status();
    EXPECT_NE(std::string(want.status().message()).find(fragment), std::string::npos) << want.status();
    if (dry_) return;
    const absl::StatusOr<std::vector<Tensor>> got = RunCuda(op, inputs, attrs, descs, input_shards, output_shards);
    EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument) << op << ": " << got.status();
    EXPECT_NE(std::string(got.status().message()).find(fragment), std::string::npos) << got.status();
    EXPECT_NE(std::string(got.status().message()).find(op + " 'test." + op + "' (cuda): "), std::string::npos)
        << got.status();
    check_indices_ = false;
    EXPECT_TRUE(RunCuda(op, inputs, attrs, descs, input_shards, output_shards).ok()) << op << " unchecked";
    check_indices_ = true;
  };
  const Tensor table = Random(DataType::kFloat32, Shape({11, 7}));
  const Tensor dy = Random(DataType::kFloat32, Shape({2, 3, 7}));
  const TensorDesc y_desc{DataType::kFloat32, Shape({2, 3, 7})};
  const Tensor ids32 = Tensor::FromVector<int32_t>(Shape({2, 3}), {0, 4, 10, 11, 3, -1});
  const Tensor ids64 = Tensor::FromVector<int64_t>(Shape({2, 3}), {0, -2, 10, 11, 3, 1});
  expect_both_fail("embedding", {table, ids32}, {}, {y_desc}, {}, {}, "id 11 at position 3 of ids is out of range [0, 11)");
  expect_both_fail("embedding", {table, ids64}, {}, {y_desc}, {}, {}, "id -2 at position 1 of ids is out of range [0, 11)");
  expect_both_fail("embedding_grad", {dy, ids32}, {{"num_embeddings", int64_t{11}}}, {table.desc()}, {}, {},
                   "id 11 at position 3 of ids is out of range [0, 11)");
  // Rows [4, 8) of the [11, 7] table: 10 is in range (another shard's row), 11 is not.
  const Tensor rows = Random(DataType::kFloat32, Shape({4, 7}));
  const ShardInfo shard{Shape({11, 7}), {4, 0}};
  expect_both_fail("embedding", {rows, ids32}, {}, {y_desc}, {shard, ShardInfo::Whole(ids32.shape())}, {},
                   "id 11 at position 3 of ids is out of range [0, 11)");
  expect_both_fail("embedding_grad", {dy, ids64}, {{"num_embeddings", int64_t{11}}}, {rows.desc()}, {}, {shard},
                   "id -2 at position 1 of ids is out of range [0, 11)");
  const Tensor logits = Random(DataType::kFloat64, Shape({2, 3, 10}), -3, 3);
  const Tensor labels = Tensor::FromVector<int64_t>(Shape({2, 3}), {1, 9, 0, 10, 2, 3});
  const Tensor labels32 = Tensor::FromVector<int32_t>(Shape({2, 3}), {1, 9, 0, 5, -1, 3});
  const TensorDesc loss_desc{DataType::kFloat64, Shape({})};
  expect_both_fail("sparse_softmax_cross_entropy", {logits, labels}, {}, {loss_desc}, {}, {},
                   "label 10 at position 3 is out of range [0, 10)");
  expect_both_fail("sparse_softmax_cross_entropy_grad", {logits, labels32, Random(DataType::kFloat64, Shape({}))}, {},
                   {logits.desc()}, {}, {}, "label -1 at position 4 is out of range [0, 10)");
}

TEST_F(OpKernelsTest, ShapeOps) {
  for (DataType dt : {DataType::kFloat32, DataType::kFloat64, DataType::kInt64, DataType::kBFloat16}) {
    const Tensor x = Random(dt, Shape({3, 5, 7}), -8, 8);
    Check("reshape", {x}, {{"shape", std::vector<int64_t>{7, -1}}}, Compare::kExact);
    Check("identity", {x}, {}, Compare::kExact);
    for (const std::vector<int64_t>& perm : {std::vector<int64_t>{2, 0, 1}, {1, 0, 2}, {0, 2, 1}, {0, 1, 2}}) {
      Check("transpose", {x}, {{"perm", perm}}, Compare::kExact);
    }
    const AttrMap slice = {{"begin", std::vector<int64_t>{1, -4, 0}}, {"end", std::vector<int64_t>{3, 5, -2}}};
    Check("slice", {x}, slice, Compare::kExact);
    AttrMap grad = slice;
    grad.Set("like_shape", std::vector<int64_t>{3, 5, 7});
    Check("slice_grad", {Random(dt, Shape({2, 4, 5}), -8, 8)}, grad, Compare::kExact);
    Check("concat", {Random(dt, Shape({3, 2, 7})), Random(dt, Shape({3, 4, 7})), Random(dt, Shape({3, 1, 7}))},
          {{"axis", int64_t{1}}}, Compare::kExact);
    Check("concat", {Random(dt, Shape({1, 5})), Random(dt, Shape({2, 5}))}, {{"axis", int64_t{0}}}, Compare::kExact);
    Check("split", {x}, {{"axis", int64_t{-1}}, {"sizes", std::vector<int64_t>{2, 5}}}, Compare::kExact);
    Check("split", {x}, {{"axis", int64_t{0}}, {"sizes", std::vector<int64_t>{1, 0, 2}}}, Compare::kExact);
  }
  // slice of a shard: x:S(0) (rows 2..3 of 6), axis 0 kept whole -> y:S(0).
  const Tensor part = Random(DataType::kFloat32, Shape({2, 5, 7}));
  const AttrMap slice = {{"begin", std::vector<int64_t>{0, 1, 2}}, {"end", std::vector<int64_t>{6, 4, 7}}};
  CheckShard("slice", {part}, slice, {{Shape({6, 5, 7}), {2, 0, 0}}}, {{DataType::kFloat32, Shape({2, 3, 5})}},
             {{Shape({6, 3, 5}), {2, 0, 0}}}, Compare::kExact);
  AttrMap grad = slice;
  grad.Set("like_shape", std::vector<int64_t>{6, 5, 7});
  CheckShard("slice_grad", {Random(DataType::kFloat32, Shape({2, 3, 5}))}, grad, {{Shape({6, 3, 5}), {2, 0, 0}}},
             {part.desc()}, {{Shape({6, 5, 7}), {2, 0, 0}}}, Compare::kExact);
}

TEST_F(OpKernelsTest, CastAndFill) {
  const std::vector<DataType> all = {DataType::kFloat32, DataType::kFloat64,  DataType::kInt32,  DataType::kInt64,
                                     DataType::kBool,    DataType::kBFloat16, DataType::kFloat16};
  for (DataType from : all) {
    const Tensor x = Random(from, Shape({3, 5, 7}), -100, 100);
    for (DataType to : all) Check("cast", {x}, {{"dtype", to}}, Compare::kExact);
  }
  for (DataType dt : all) {
    Check("fill", {}, {{"shape", std::vector<int64_t>{3, 5}}, {"dtype", dt}, {"value", -1.5}}, Compare::kExact);
  }
  Check("fill", {}, {{"shape", std::vector<int64_t>{0, 4}}, {"value", 2.0}}, Compare::kExact);
}

TEST_F(OpKernelsTest, Random) {
  for (DataType dt : {DataType::kFloat32, DataType::kFloat64, DataType::kBFloat16, DataType::kFloat16}) {
    const AttrMap uniform = {{"shape", std::vector<int64_t>{3, 5, 7}}, {"dtype", dt}, {"seed", int64_t{42}},
                             {"low", -2.0}, {"high", 3.0}};
    Check("random_uniform", {}, uniform, Compare::kExact);
    CheckShard("random_uniform", {}, uniform, {}, {{dt, Shape({3, 2, 7})}}, {{Shape({3, 5, 7}), {0, 3, 0}}},
               Compare::kExact);
  }
  for (DataType dt : kFloats) {
    const AttrMap normal = {{"shape", std::vector<int64_t>{17, 33}}, {"dtype", dt}, {"seed", int64_t{7}},
                            {"mean", 0.5}, {"std", 2.0}};
    Check("random_normal", {}, normal, Compare::kElementwise);
    CheckShard("random_normal", {}, normal, {}, {{dt, Shape({17, 10})}}, {{Shape({17, 33}), {0, 20}}},
               Compare::kElementwise);
    const AttrMap dropout = {{"p", 0.3}, {"seed", int64_t{11}}};
    for (const char* op : {"dropout", "dropout_grad"}) {
      Check(op, {Random(dt, Shape({17, 33}))}, dropout, Compare::kExact);
      // Rows 5..8 of 17: the mask of the logical elements.
      const Tensor part = Random(dt, Shape({4, 33}));
      CheckShard(op, {part}, dropout, {{Shape({17, 33}), {5, 0}}}, {part.desc()}, {{Shape({17, 33}), {5, 0}}},
                 Compare::kExact);
    }
  }
}

TEST_F(OpKernelsTest, Optimizers) {
  for (DataType dt : kFloats) {
    const Shape shape({5, 37});
    const Tensor param = Random(dt, shape), grad = Random(dt, shape), buf = Random(dt, shape);
    for (double momentum : {0.0, 0.9}) {
      Check("sgd_update", {param, grad, buf}, {{"lr", 0.1}, {"momentum", momentum}, {"weight_decay", 0.01}},
            Compare::kElementwise);
    }
    Check("sgd_plain_update", {param, grad}, {{"lr", 0.1}, {"weight_decay", 0.01}}, Compare::kElementwise);
    const Tensor m = Random(dt, shape), v = Random(dt, shape, 0.0, 1.0);
    for (DataType it : {DataType::kInt32, DataType::kInt64}) {
      const Tensor step = oneflow_like::testing::TensorFromDoubles(it, Shape({}), {3});
      for (bool decoupled : {true, false}) {
        for (bool bias_correction : {true, false}) {
          Check("adam_update", {param, grad, m, v, step},
                {{"lr", 1e-2}, {"weight_decay", 0.1}, {"decoupled_weight_decay", decoupled},
                 {"bias_correction", bias_correction}},
                Compare::kElementwise);
        }
      }
      Check("step_increment", {step}, {}, Compare::kExact);
    }
  }
}

// Empty tensors: nothing to launch, but outputs that have elements must still be written (an
// empty sum is zeros, the loss of no rows is 0, a matmul over k = 0 is zeros).
TEST_F(OpKernelsTest, EmptyTensors) {
  const DataType f = DataType::kFloat32;
  Check("relu", {Random(f, Shape({0, 5}))}, {}, Compare::kExact);
  Check("add", {Random(f, Shape({0, 5})), Random(f, Shape({5}))}, {}, Compare::kExact);
  Check("reduce_sum", {Random(f, Shape({0, 5}))}, {{"axes", std::vector<int64_t>{0}}}, Compare::kExact);
  Check("reduce_mean", {Random(f, Shape({0, 5}))}, {{"axes", std::vector<int64_t>{0}}}, Compare::kExact);
  Check("matmul", {Random(f, Shape({0, 3})), Random(f, Shape({3, 4}))}, {}, Compare::kExact);
  Check("matmul", {Random(f, Shape({3, 0})), Random(f, Shape({0, 4}))}, {}, Compare::kExact);
  Check("softmax", {Random(f, Shape({0, 7}))}, {}, Compare::kExact);
  Check("layer_norm", {Random(f, Shape({0, 5})), Random(f, Shape({5})), Random(f, Shape({5}))}, {}, Compare::kExact);
  Check("sparse_softmax_cross_entropy", {Random(f, Shape({0, 10})), Random(DataType::kInt64, Shape({0}), 0, 10)}, {},
        Compare::kExact);
  Check("concat", {Random(f, Shape({2, 0})), Random(f, Shape({2, 3}))}, {{"axis", int64_t{1}}}, Compare::kExact);
  Check("transpose", {Random(f, Shape({0, 3, 2}))}, {{"perm", std::vector<int64_t>{2, 0, 1}}}, Compare::kExact);
}

// Optimizer outputs in place (OpDef::inplace_pairs: param_out = param, m_out = m, v_out = v), as
// the runtime runs them.
TEST_F(OpKernelsTest, AdamInPlace) {
  if (dry_) GTEST_SKIP() << "dry run: needs device memory";
  const Shape shape({3, 129});
  const Tensor param = Random(DataType::kFloat32, shape), grad = Random(DataType::kFloat32, shape);
  const Tensor m = Random(DataType::kFloat32, shape), v = Random(DataType::kFloat32, shape, 0.0, 1.0);
  const Tensor step = oneflow_like::testing::TensorFromDoubles(DataType::kInt64, Shape({}), {2});
  const AttrMap attrs = {{"lr", 1e-2}, {"weight_decay", 0.1}};
  const std::vector<Tensor> want = cpu().RunOk("adam_update", {param, grad, m, v, step}, attrs);
  ASSERT_EQ(want.size(), 3u);
  ASSERT_OK(cpu().registry().Get("adam_update").status());
  const AttrMap validated = *(*cpu().registry().Get("adam_update"))->ValidateAttrs("adam", attrs);
  std::vector<Tensor> device;
  for (const Tensor* t : {&param, &grad, &m, &v, &step}) device.push_back(Tensor::Borrow(t->desc(), UploadRaw(*t)));
  const std::string name = "adam";
  CudaKernelContext ctx{name, validated};
  for (const Tensor& t : device) ctx.inputs.push_back(&t);
  ctx.outputs = {&device[0], &device[2], &device[3]};
  ctx.stream = stream();
  ASSERT_OK((*table_.Find("adam_update"))(ctx));
  ExpectClose(Download(device[0].raw_data(), param.desc()), want[0], Tolerance::kElementwise, "param in place");
  ExpectClose(Download(device[2].raw_data(), m.desc()), want[1], Tolerance::kElementwise, "m in place");
  ExpectClose(Download(device[3].raw_data(), v.desc()), want[2], Tolerance::kElementwise, "v in place");
}

}  // namespace
}  // namespace testing
}  // namespace cuda
}  // namespace oneflow_like
