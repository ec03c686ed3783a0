// CUDA embedding kernels vs the CPU ops embedding and embedding_grad, whole tables and a
// vocab-parallel shard (rows [4, 8) of a logical [11, 7] table).
#include <string>
#include <vector>

#include "oneflow_like/core/cuda/cuda_test_util.h"
#include "oneflow_like/core/cuda/embedding_kernels.h"

namespace oneflow_like {
namespace cuda {
namespace testing {
namespace {

using ::oneflow_like::testing::RandomTensor;

class EmbeddingTest : public CudaKernelTest {
 protected:
  template <typename T, typename I>
  void Check(int64_t vocab, int64_t dim, const Shape& ids_shape, uint64_t seed) {
    const DataType dt = DataTypeOf<T>::value;
    const Tensor table = RandomTensor(dt, Shape({vocab, dim}), seed);
    const Tensor ids = RandomTensor(DataTypeOf<I>::value, ids_shape, seed + 1, 0.0, static_cast<double>(vocab));
    const int64_t n = ids.elem_count();
    const std::string what = "embedding " + table.desc().ToString() + " " + ids.desc().ToString();
    const Tensor want = cpu().RunOne("embedding", {table, ids});
    T* y = Output<T>(want.desc());
    ASSERT_OK(Embedding<T, I>(Upload<T>(table), vocab, dim, 0, Upload<I>(ids), n, y, stream()));
    ExpectClose(Download(y, want.desc()), want, Tolerance::kElementwise, what);

    const Tensor dy = RandomTensor(dt, want.shape(), seed + 2);
    const Tensor want_dt = cpu().RunOne("embedding_grad", {dy, ids}, {{"num_embeddings", vocab}});
    T* dtable = Output<T>(table.desc());
    ASSERT_OK(EmbeddingGrad<T, I>(Upload<T>(dy), Upload<I>(ids), n, dim, 0, vocab, dtable, stream()));
    ExpectClose(Download(dtable, table.desc()), want_dt, Tolerance::kReduction, what + " grad");
  }
};

TEST_F(EmbeddingTest, WholeTables) {
  Check<float, int32_t>(11, 7, Shape({3, 5}), 61);
  Check<float, int64_t>(1, 1, Shape({1, 1}), 62);
  Check<float, int64_t>(17, 33, Shape({40}), 63);  // repeated ids: the gradient adds
  Check<double, int64_t>(11, 7, Shape({3, 5}), 64);
  Check<double, int32_t>(5, 300, Shape({2, 3, 4}), 65);
}

TEST_F(EmbeddingTest, VocabShard) {
  const Tensor table = RandomTensor(DataType::kFloat32, Shape({4, 7}), 70);  // rows [4, 8) of [11, 7]
  const Tensor ids = RandomTensor(DataType::kInt64, Shape({3, 5}), 71, 0.0, 11.0);
  const ShardInfo shard{Shape({11, 7}), {4, 0}};
  const TensorDesc y_desc{DataType::kFloat32, Shape({3, 5, 7})};
  absl::StatusOr<std::vector<Tensor>> want =
      cpu().RunShard("embedding", {table, ids}, {}, {shard, ShardInfo::Whole(ids.shape())}, {y_desc}, {});
  ASSERT_OK(want.status());
  float* y = Output<float>(y_desc);
  ASSERT_OK(Embedding<float, int64_t>(Upload<float>(table), 4, 7, 4, Upload<int64_t>(ids), 15, y, stream()));
  ExpectClose(Download(y, y_desc), (*want)[0], Tolerance::kElementwise, "embedding vocab shard");

  const Tensor dy = RandomTensor(DataType::kFloat32, Shape({3, 5, 7}), 72);
  absl::StatusOr<std::vector<Tensor>> want_dt =
      cpu().RunShard("embedding_grad", {dy, ids}, {{"num_embeddings", int64_t{11}}}, {}, {table.desc()}, {shard});
  ASSERT_OK(want_dt.status());
  float* dtable = Output<float>(table.desc());
  ASSERT_OK(EmbeddingGrad<float, int64_t>(Upload<float>(dy), Upload<int64_t>(ids), 15, 7, 4, 4, dtable, stream()));
  ExpectClose(Download(dtable, table.desc()), (*want_dt)[0], Tolerance::kReduction, "embedding_grad vocab shard");
}

}  // namespace
}  // namespace testing
}  // namespace cuda
}  // namespace oneflow_like
