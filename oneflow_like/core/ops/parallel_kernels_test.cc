// The kernels that split their loops over the rank's intra-op threads (KernelContext::
// intra_op_pool) give bit-identical results to the serial kernel: for every such kernel, odd
// shapes run serially, on pools of 2 and 3 threads that split every loop (min_parallel_work
// = 1: many small chunks, boundaries anywhere), and on a default pool with shapes above its
// threshold; every output must have the same bytes. The exception is matmul: a product split
// over threads differs from the whole one in the last bits (OpenBLAS's blocking follows the
// operand sizes), so it is checked against the serial result to a float32 tolerance, and for
// determinism (the same pool twice gives the same bytes).
#include <cstring>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "oneflow_like/core/intra_op_pool.h"
#include "oneflow_like/core/testing/op_test_util.h"

namespace oneflow_like {
namespace {

using testing::OpTest;
using testing::PoisonedTensor;
using testing::RandomTensor;

class ParallelKernelsTest : public ::testing::Test {
 protected:
  // The kernel of `op` on whole `inputs`, outputs poisoned first; pool null = serial.
  std::vector<Tensor> Run(const std::string& op, const std::vector<Tensor>& inputs, const AttrMap& attrs,
                          IntraOpPool* pool) const {
    const OpDef* def = *t_.registry().Get(op);
    const AttrMap full = *def->ValidateAttrs(op, attrs);
    std::vector<TensorDesc> in;
    for (const Tensor& x : inputs) in.push_back(x.desc());
    absl::StatusOr<std::vector<TensorDesc>> out = def->Infer(op, full, in);
    EXPECT_TRUE(out.ok()) << out.status();
    if (!out.ok()) return {};
    std::vector<Tensor> outputs;
    for (const TensorDesc& d : *out) outputs.push_back(PoisonedTensor(d));
    KernelContext ctx{op, full, {}, {}, {}, {}, nullptr, pool};
    for (const Tensor& x : inputs) {
      ctx.inputs.push_back(&x);
      ctx.input_shards.push_back(ShardInfo::Whole(x.shape()));
    }
    for (Tensor& y : outputs) {
      ctx.outputs.push_back(&y);
      ctx.output_shards.push_back(ShardInfo::Whole(y.shape()));
    }
    const absl::Status status = def->cpu_kernel(ctx);
    EXPECT_TRUE(status.ok()) << op << ": " << status;
    return outputs;
  }

  // Serial vs the split pools to a tolerance; each pool twice: identical bytes.
  void ExpectCloseAndDeterministic(const std::string& op, const std::vector<Tensor>& inputs, const AttrMap& attrs) {
    const std::vector<Tensor> serial = Run(op, inputs, attrs, nullptr);
    for (IntraOpPool* pool : {&split2_, &split3_, &defaults_}) {
      const std::vector<Tensor> once = Run(op, inputs, attrs, pool), twice = Run(op, inputs, attrs, pool);
      ASSERT_EQ(once.size(), 1u);
      // Sums of up to 1023 products of [-1, 1) values in another order: float32 rounding.
      testing::ExpectTensorNear(once[0], serial[0], 1e-4, 1e-4);
      EXPECT_EQ(std::memcmp(once[0].raw_data(), twice[0].raw_data(), once[0].byte_size()), 0) << op;
    }
  }

  // Serial vs the split pools: identical bytes in every output.
  void ExpectBitIdentical(const std::string& op, const std::vector<Tensor>& inputs, const AttrMap& attrs = {}) {
    const std::vector<Tensor> serial = Run(op, inputs, attrs, nullptr);
    for (IntraOpPool* pool : {&split2_, &split3_, &defaults_}) {
      const std::vector<Tensor> threaded = Run(op, inputs, attrs, pool);
      ASSERT_EQ(threaded.size(), serial.size());
      for (size_t k = 0; k < serial.size(); ++k) {
        ASSERT_EQ(threaded[k].desc(), serial[k].desc());
        EXPECT_EQ(std::memcmp(threaded[k].raw_data(), serial[k].raw_data(), serial[k].byte_size()), 0)
            << op << " output " << k << " " << serial[k].desc().ToString() << " differs on a pool of "
            << pool->num_threads() << " threads (min_parallel_work " << pool->min_parallel_work() << ")";
      }
    }
  }

  static Tensor F32(const Shape& shape, uint64_t seed, double low = -3, double high = 3) {
    return RandomTensor(DataType::kFloat32, shape, seed, low, high);
  }

  OpTest t_;
  IntraOpPool split2_{2, /*spin_us=*/50, /*min_parallel_work=*/1};
  IntraOpPool split3_{3, /*spin_us=*/0, /*min_parallel_work=*/1};
  IntraOpPool defaults_{2};
};

// Odd shapes: rows and columns not multiples of the 16-wide blocks or of the thread count; the
// last ones are over the default pool's threshold (64K elements).
const std::vector<Shape> kShapes = {Shape{3, 1023}, Shape{257, 129}, Shape{3, 517, 47}, Shape{257, 1023}};

TEST_F(ParallelKernelsTest, Activations) {
  for (const Shape& s : kShapes) {
    SCOPED_TRACE(s.ToString());
    const Tensor x = F32(s, 1), dy = F32(s, 2);
    for (const char* approximate : {"tanh", "none"}) {
      ExpectBitIdentical("gelu", {x}, {{"approximate", std::string(approximate)}});
      ExpectBitIdentical("gelu_grad", {dy, x}, {{"approximate", std::string(approximate)}});
    }
    ExpectBitIdentical("relu", {x});
    ExpectBitIdentical("relu_grad", {dy, x});
  }
  ExpectBitIdentical("gelu", {RandomTensor(DataType::kFloat64, Shape{257, 129}, 3, -3, 3)});
}

TEST_F(ParallelKernelsTest, BinaryScalarAndBiasAdd) {
  for (const Shape& s : kShapes) {
    SCOPED_TRACE(s.ToString());
    const Tensor a = F32(s, 4), b = F32(s, 5, 0.5, 2);
    const Tensor row = F32(Shape{s.dim(s.num_axes() - 1)}, 6, 0.5, 2), one = F32(Shape{1}, 7, 0.5, 2);
    for (const char* op : {"add", "sub", "mul", "div"}) {
      ExpectBitIdentical(op, {a, b});
      ExpectBitIdentical(op, {a, row});
      ExpectBitIdentical(op, {one, a});
    }
    ExpectBitIdentical("scalar_add", {a}, {{"value", 0.3}});
    ExpectBitIdentical("scalar_mul", {a}, {{"value", -1.7}});
    ExpectBitIdentical("bias_add", {a, row});                                         // rows of channels
    ExpectBitIdentical("bias_add", {a, F32(Shape{s.dim(0)}, 8)}, {{"axis", int64_t{0}}});  // one outer row
  }
  // Broadcasting in the middle: [3,1,1023] * [5,1] -> [3,5,1023]; bias along a middle axis.
  ExpectBitIdentical("mul", {F32(Shape{3, 1, 1023}, 9), F32(Shape{5, 1}, 10)});
  ExpectBitIdentical("bias_add", {F32(Shape{3, 517, 47}, 11), F32(Shape{517}, 12)}, {{"axis", int64_t{1}}});
}

TEST_F(ParallelKernelsTest, SoftmaxFamily) {
  for (const Shape& s : kShapes) {
    SCOPED_TRACE(s.ToString());
    const Tensor x = F32(s, 13), dy = F32(s, 14);
    for (const char* op : {"softmax", "log_softmax"}) {
      const std::string grad = std::string(op) + "_grad";
      for (bool causal : {false, true}) {
        const AttrMap attrs = {{"causal", causal}};
        ExpectBitIdentical(op, {x}, attrs);
        const Tensor y = Run(op, {x}, attrs, nullptr)[0];
        ExpectBitIdentical(grad, {y, dy}, attrs);
      }
    }
  }
}

TEST_F(ParallelKernelsTest, LayerNormAndItsGradient) {
  for (const Shape& s : kShapes) {
    SCOPED_TRACE(s.ToString());
    const int64_t d = s.dim(s.num_axes() - 1);
    const Tensor x = F32(s, 15), gamma = F32(Shape{d}, 16, 0.5, 1.5), beta = F32(Shape{d}, 17);
    ExpectBitIdentical("layer_norm", {x, gamma, beta});
    const std::vector<Tensor> fwd = Run("layer_norm", {x, gamma, beta}, {}, nullptr);
    ExpectBitIdentical("layer_norm_grad", {F32(s, 18), x, fwd[1], fwd[2], gamma});
  }
}

TEST_F(ParallelKernelsTest, CrossEntropyAndItsGradient) {
  for (const Shape& s : {Shape{3, 1023}, Shape{257, 129}, Shape{3, 517, 47}, Shape{67, 2048}}) {
    SCOPED_TRACE(s.ToString());
    std::vector<int64_t> label_dims(s.dims().begin(), s.dims().end() - 1);
    const Shape label_shape(label_dims);
    for (DataType index : {DataType::kInt32, DataType::kInt64}) {
      const Tensor logits = F32(s, 19), labels = RandomTensor(index, label_shape, 20, 0, s.dim(s.num_axes() - 1));
      ExpectBitIdentical("sparse_softmax_cross_entropy", {logits, labels});
      ExpectBitIdentical("sparse_softmax_cross_entropy_grad",
                         {logits, labels, Tensor::FromVector<float>(Shape{}, {0.75f})});
    }
  }
}

TEST_F(ParallelKernelsTest, OptimizerUpdates) {
  for (const Shape& s : kShapes) {
    SCOPED_TRACE(s.ToString());
    const Tensor p = F32(s, 21), g = F32(s, 22), m = F32(s, 23), v = F32(s, 24, 0, 1);
    const Tensor step = Tensor::FromVector<int64_t>(Shape{}, {3});
    ExpectBitIdentical("adam_update", {p, g, m, v, step}, {{"lr", 1e-3}, {"weight_decay", 0.01}});
    ExpectBitIdentical("adam_update", {p, g, m, v, step},
                       {{"lr", 1e-3}, {"weight_decay", 0.01}, {"decoupled_weight_decay", false}});
    ExpectBitIdentical("sgd_update", {p, g, m}, {{"lr", 0.1}, {"momentum", 0.9}, {"weight_decay", 1e-4}});
    ExpectBitIdentical("sgd_update", {p, g, m}, {{"lr", 0.1}, {"momentum", 0.0}});
    ExpectBitIdentical("sgd_plain_update", {p, g}, {{"lr", 0.1}, {"weight_decay", 1e-4}});
  }
}

TEST_F(ParallelKernelsTest, AdamInPlaceOnThreadsEqualsSerial) {
  const Shape s{257, 1023};
  const Tensor p = F32(s, 25), g = F32(s, 26), m = F32(s, 27), v = F32(s, 28, 0, 1);
  const Tensor step = Tensor::FromVector<int64_t>(Shape{}, {2});
  const AttrMap attrs = *(*t_.registry().Get("adam_update"))->ValidateAttrs("adam", {{"lr", 1e-3}});
  const std::vector<Tensor> serial = Run("adam_update", {p, g, m, v, step}, attrs, nullptr);
  Tensor p2 = p.Clone(), m2 = m.Clone(), v2 = v.Clone();  // outputs alias their inputs
  const OpDef* def = *t_.registry().Get("adam_update");
  KernelContext ctx{"adam", attrs, {&p2, &g, &m2, &v2, &step}, {&p2, &m2, &v2}, {}, {}, nullptr, &defaults_};
  ASSERT_TRUE(def->cpu_kernel(ctx).ok());
  const Tensor* in_place[] = {&p2, &m2, &v2};
  for (int k = 0; k < 3; ++k) {
    EXPECT_EQ(std::memcmp(in_place[k]->raw_data(), serial[k].raw_data(), serial[k].byte_size()), 0) << "output " << k;
  }
}

TEST_F(ParallelKernelsTest, Reductions) {
  const Tensor x2 = F32(Shape{257, 1023}, 29), x3 = F32(Shape{7, 33, 1023}, 30);
  const Tensor i3 = RandomTensor(DataType::kInt64, Shape{7, 33, 129}, 31, -50, 50);
  for (const char* op : {"reduce_sum", "reduce_mean"}) {
    for (const std::vector<int64_t>& axes : std::vector<std::vector<int64_t>>{{0}, {1}, {}}) {
      ExpectBitIdentical(op, {x2}, {{"axes", axes}});
    }
    for (const std::vector<int64_t>& axes : std::vector<std::vector<int64_t>>{{0}, {1}, {2}, {0, 1}, {0, 2}, {1, 2}}) {
      ExpectBitIdentical(op, {x3}, {{"axes", axes}, {"keepdims", true}});
    }
  }
  ExpectBitIdentical("reduce_sum", {i3}, {{"axes", std::vector<int64_t>{0, 1}}});
  // Wide enough to split the columns of a column sum (the bias gradient).
  ExpectBitIdentical("reduce_sum", {F32(Shape{33, 4099}, 40)}, {{"axes", std::vector<int64_t>{0}}});
  ExpectBitIdentical("reduce_sum", {F32(Shape{5, 7, 4099}, 41)}, {{"axes", std::vector<int64_t>{0, 1}}});
}

TEST_F(ParallelKernelsTest, ShapeCopies) {
  const Tensor x = F32(Shape{3, 517, 47}, 32), big = F32(Shape{9, 129, 257}, 33);
  for (const Tensor* t : {&x, &big}) {
    const std::vector<int64_t> dims = t->shape().dims();
    SCOPED_TRACE(t->shape().ToString());
    ExpectBitIdentical("transpose", {*t}, {{"perm", std::vector<int64_t>{2, 0, 1}}});
    ExpectBitIdentical("transpose", {*t}, {{"perm", std::vector<int64_t>{1, 0, 2}}});
    ExpectBitIdentical("reshape", {*t}, {{"shape", std::vector<int64_t>{-1}}});
    ExpectBitIdentical("identity", {*t});
    const std::vector<int64_t> begin = {1, 2, 3}, end = {dims[0], dims[1] - 1, dims[2] - 5};
    ExpectBitIdentical("slice", {*t}, {{"begin", begin}, {"end", end}});
    const Tensor part = Run("slice", {*t}, {{"begin", begin}, {"end", end}}, nullptr)[0];
    ExpectBitIdentical("slice_grad", {part}, {{"like_shape", dims}, {"begin", begin}, {"end", end}});
    for (int64_t axis : {0, 1, 2}) {
      ExpectBitIdentical("split", {*t}, {{"axis", axis}, {"sizes", std::vector<int64_t>{1, dims[axis] - 1}}});
      ExpectBitIdentical("concat", {*t, *t}, {{"axis", axis}});
    }
  }
}

TEST_F(ParallelKernelsTest, MatmulsSplitByBatchRowsOrColumnsStayCloseAndDeterministic) {
  struct Case {
    Shape a, b;
    bool ta, tb;
  };
  const std::vector<Case> cases = {
      {Shape{257, 129}, Shape{129, 65}, false, false},     // rows of y
      {Shape{129, 257}, Shape{65, 129}, true, true},       // transposed operands
      {Shape{5, 1023}, Shape{1023, 129}, false, false},    // too few rows: columns of y
      {Shape{6, 33, 129}, Shape{6, 129, 47}, false, false},  // the batch
      {Shape{3, 257, 129}, Shape{65, 129}, false, true},   // shared b folded into rows
      {Shape{3, 129, 57}, Shape{65, 129}, true, true},     // shared b, a transposed: per matrix
      {Shape{512, 256}, Shape{256, 512}, false, false},    // above the default threshold
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.a.ToString() + " @ " + c.b.ToString());
    const AttrMap attrs = {{"transpose_a", c.ta}, {"transpose_b", c.tb}, {"alpha", 0.5}};
    for (DataType dtype : {DataType::kFloat32, DataType::kFloat64}) {
      ExpectCloseAndDeterministic("matmul", {RandomTensor(dtype, c.a, 34), RandomTensor(dtype, c.b, 35)}, attrs);
    }
  }
  // matmul_batch_sum: folded into one product over k (transpose_a, !transpose_b), or a sum of
  // products per block of y.
  const Tensor a = F32(Shape{4, 129, 65}, 36), b = F32(Shape{4, 129, 257}, 37), bt = F32(Shape{4, 257, 129}, 38);
  ExpectCloseAndDeterministic("matmul_batch_sum", {a, b}, {{"transpose_a", true}});
  ExpectCloseAndDeterministic("matmul_batch_sum", {a, bt}, {{"transpose_a", true}, {"transpose_b", true}});
  ExpectCloseAndDeterministic("matmul_batch_sum", {F32(Shape{4, 257, 129}, 39), a}, {});
}

}  // namespace
}  // namespace oneflow_like
