// CUDA cross-entropy kernels vs the CPU ops sparse_softmax_cross_entropy and its grad, int32
// and int64 labels; and the device label check naming the first bad position.
#include <string>
#include <vector>

#include "oneflow_like/core/cuda/cuda_test_util.h"
#include "oneflow_like/core/cuda/index_kernels.h"
#include "oneflow_like/core/cuda/loss_kernels.h"

namespace oneflow_like {
namespace cuda {
namespace testing {
namespace {

using ::oneflow_like::testing::RandomTensor;

class CrossEntropyTest : public CudaKernelTest {
 protected:
  template <typename T, typename I>
  void Check(const Shape& logits_shape, uint64_t seed) {
    const DataType dt = DataTypeOf<T>::value;
    const int rank = logits_shape.num_axes();
    const int64_t classes = logits_shape.dim(rank - 1);
    const Shape label_shape(std::vector<int64_t>(logits_shape.dims().begin(), logits_shape.dims().end() - 1));
    const int64_t rows = label_shape.elem_count();
    const Tensor logits = RandomTensor(dt, logits_shape, seed, -4.0, 4.0);
    const Tensor labels = RandomTensor(DataTypeOf<I>::value, label_shape, seed + 1, 0.0, static_cast<double>(classes));
    const std::string what = "cross_entropy " + logits.desc().ToString() + " " + labels.desc().ToString();

    const Tensor want = cpu().RunOne("sparse_softmax_cross_entropy", {logits, labels});
    T* loss = Output<T>(want.desc());
    void* workspace = OutputRaw(CrossEntropyWorkspaceBytes(rows));
    const T* d_logits = Upload<T>(logits);
    const I* d_labels = Upload<I>(labels);
    ASSERT_OK(SparseSoftmaxCrossEntropy<T, I>(d_logits, d_labels, rows, classes, rows, loss, workspace, stream()));
    ExpectClose(Download(loss, want.desc()), want, Tolerance::kReduction, what);

    const Tensor dloss = RandomTensor(dt, Shape{}, seed + 2, 0.5, 1.5);
    const Tensor want_dx = cpu().RunOne("sparse_softmax_cross_entropy_grad", {logits, labels, dloss});
    T* dx = Output<T>(logits.desc());
    ASSERT_OK(SparseSoftmaxCrossEntropyGrad<T, I>(d_logits, d_labels, Upload<T>(dloss), rows, classes, rows, dx,
                                                  stream()));
    ExpectClose(Download(dx, logits.desc()), want_dx, Tolerance::kReduction, what + " grad");
  }

  template <typename T, typename I>
  void CheckAll() {
    uint64_t seed = 51;
    for (const Shape& shape : {Shape({17, 33}), Shape({3, 5, 7}), Shape({1, 1}), Shape({4, 2000}), Shape({500, 3})}) {
      Check<T, I>(shape, seed += 3);
    }
  }
};

TEST_F(CrossEntropyTest, FloatInt32) { CheckAll<float, int32_t>(); }
TEST_F(CrossEntropyTest, FloatInt64) { CheckAll<float, int64_t>(); }
TEST_F(CrossEntropyTest, DoubleInt64) { CheckAll<double, int64_t>(); }

TEST_F(CrossEntropyTest, FindsTheFirstLabelOutOfRange) {
  const Tensor labels = ::oneflow_like::testing::TensorFromDoubles(DataType::kInt64, Shape({6}), {0, 4, 5, 2, -1, 9});
  int64_t* scratch = Output<int64_t>(TensorDesc{DataType::kInt64, Shape({1})});
  absl::StatusOr<int64_t> bad = FindIndexOutOfRange<int64_t>(Upload<int64_t>(labels), 6, 5, scratch, stream());
  ASSERT_OK(bad.status());
  EXPECT_EQ(*bad, 2);  // label 5 at position 2 is outside [0, 5)
  bad = FindIndexOutOfRange<int64_t>(Upload<int64_t>(labels), 4, 6, scratch, stream());
  ASSERT_OK(bad.status());
  EXPECT_EQ(*bad, -1);
}

}  // namespace
}  // namespace testing
}  // namespace cuda
}  // namespace oneflow_like
