// Tests for embedding and embedding_grad: lookups and scatter-adds against plain references,
// vocab-parallel shards, out-of-range ids, numerical gradients and every SBP signature.
#include <cmath>

#include "gtest/gtest.h"
#include "oneflow_like/core/testing/op_test_util.h"

namespace oneflow_like {
namespace {

using testing::ExpectTensorNear;
using testing::OpTest;
using testing::RandomTensor;

Tensor RefEmbedding(const Tensor& table, const Tensor& ids) {
  const int64_t d = table.shape().dim(1);
  std::vector<int64_t> dims = ids.shape().dims();
  dims.push_back(d);
  Tensor y(DataType::kFloat64, Shape(dims));
  for (int64_t p = 0; p < ids.elem_count(); ++p) {
    const int64_t v = static_cast<int64_t>(ids.GetAsDouble(p));
    for (int64_t j = 0; j < d; ++j) y.SetFromDouble(p * d + j, table.GetAsDouble(v * d + j));
  }
  return y;
}

Tensor RefEmbeddingGrad(const Tensor& dy, const Tensor& ids, int64_t vocab) {
  const int64_t d = dy.shape().dim(dy.shape().num_axes() - 1);
  Tensor dt(DataType::kFloat64, Shape{vocab, d});
  for (int64_t p = 0; p < ids.elem_count(); ++p) {
    const int64_t v = static_cast<int64_t>(ids.GetAsDouble(p));
    for (int64_t j = 0; j < d; ++j) dt.SetFromDouble(v * d + j, dt.GetAsDouble(v * d + j) + dy.GetAsDouble(p * d + j));
  }
  return dt;
}

class EmbeddingTest : public ::testing::Test {
 protected:
  OpTest t_;
};

TEST_F(EmbeddingTest, KnownValues) {
  Tensor table = Tensor::FromVector<float>({3, 2}, {0, 1, 10, 11, 20, 21});
  Tensor ids = Tensor::FromVector<int32_t>({2, 2}, {2, 0, 2, 1});
  auto y = t_.Run("embedding", {table, ids});
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ((*y)[0].shape(), (Shape{2, 2, 2}));
  EXPECT_EQ((*y)[0].ToVector<float>(), (std::vector<float>{20, 21, 0, 1, 20, 21, 10, 11}));

  // The repeated id 2 accumulates.
  Tensor dy = Tensor::FromVector<float>({2, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8});
  auto dt = t_.Run("embedding_grad", {dy, ids}, {{"num_embeddings", int64_t{3}}});
  ASSERT_TRUE(dt.ok()) << dt.status();
  EXPECT_EQ((*dt)[0].ToVector<float>(), (std::vector<float>{3, 4, 7, 8, 6, 8}));
}

TEST_F(EmbeddingTest, MatchesReference) {
  for (DataType dt : {DataType::kFloat32, DataType::kFloat64}) {
    for (DataType it : {DataType::kInt32, DataType::kInt64}) {
      for (const Shape& ids_shape : std::vector<Shape>{{}, {4}, {3, 5}}) {
        Tensor table = RandomTensor(dt, {11, 13}, 1);
        Tensor ids = RandomTensor(it, ids_shape, 2, 0, 11);
        auto y = t_.Run("embedding", {table, ids});
        ASSERT_TRUE(y.ok()) << y.status();
        ExpectTensorNear((*y)[0], RefEmbedding(table, ids), 0, 0, "embedding " + ids_shape.ToString());

        std::vector<int64_t> dims = ids_shape.dims();
        dims.push_back(13);
        Tensor dy = RandomTensor(dt, Shape(dims), 3);
        auto dtable = t_.Run("embedding_grad", {dy, ids}, {{"num_embeddings", int64_t{11}}});
        ASSERT_TRUE(dtable.ok()) << dtable.status();
        ExpectTensorNear((*dtable)[0], RefEmbeddingGrad(dy, ids, 11), 1e-6, 1e-6,
                         "embedding_grad " + ids_shape.ToString());
      }
    }
  }
}

TEST_F(EmbeddingTest, VocabShardLooksUpOnlyItsRows) {
  // Rows [4, 8) of a [11, 3] table: ids outside the range give zeros, ids are checked against
  // the logical V = 11, not the shard's 4 rows.
  Tensor table = RandomTensor(DataType::kFloat32, {11, 3}, 4);
  Tensor shard(DataType::kFloat32, Shape{4, 3});
  for (int64_t e = 0; e < 12; ++e) shard.SetFromDouble(e, table.GetAsDouble(12 + e));
  Tensor ids = Tensor::FromVector<int64_t>({5}, {4, 10, 7, 0, 5});
  // Outputs start poisoned: the zeros for other shards' ids must be written, not assumed.
  auto y = t_.RunShard("embedding", {shard, ids}, {}, {ShardInfo{Shape{11, 3}, {4, 0}}, ShardInfo::Whole(ids.shape())},
                       {TensorDesc{DataType::kFloat32, Shape{5, 3}}}, {});
  ASSERT_TRUE(y.ok()) << y.status();
  Tensor ref = RefEmbedding(table, ids);
  for (int64_t p = 0; p < 5; ++p) {
    const int64_t v = static_cast<int64_t>(ids.GetAsDouble(p));
    for (int64_t j = 0; j < 3; ++j) {
      const double want = v >= 4 && v < 8 ? ref.GetAsDouble(p * 3 + j) : 0.0;
      EXPECT_EQ((*y)[0].GetAsDouble(p * 3 + j), want) << "position " << p << " id " << v;
    }
  }
}

TEST_F(EmbeddingTest, GradVocabShardWritesEveryRow) {
  // dtable rows [3, 6) of V = 7, on a poisoned buffer: untouched rows must come out as zeros.
  Tensor dy = RandomTensor(DataType::kFloat64, {4, 2}, 11);
  Tensor ids = Tensor::FromVector<int32_t>({4}, {3, 0, 5, 3});
  auto dt = t_.RunShard("embedding_grad", {dy, ids}, {{"num_embeddings", int64_t{7}}}, {},
                        {TensorDesc{DataType::kFloat64, Shape{3, 2}}}, {ShardInfo{Shape{7, 2}, {3, 0}}});
  ASSERT_TRUE(dt.ok()) << dt.status();
  Tensor full = RefEmbeddingGrad(dy, ids, 7);
  Tensor want(DataType::kFloat64, Shape{3, 2});
  for (int64_t e = 0; e < 6; ++e) want.SetFromDouble(e, full.GetAsDouble(6 + e));
  ExpectTensorNear((*dt)[0], want, 1e-15, 0, "rows [3, 6)");
}

TEST_F(EmbeddingTest, OutOfRangeIdsAreRejected) {
  Tensor table(DataType::kFloat32, Shape{10, 4});
  for (int64_t bad : {int64_t{10}, int64_t{-1}}) {
    Tensor ids = Tensor::FromVector<int64_t>({3}, {1, bad, 2});
    t_.ExpectRunFails("embedding", {table, ids}, {}, {absl::StrCat("id ", bad), "position 1", "V = 10"});
    t_.ExpectRunFails("embedding_grad", {Tensor(DataType::kFloat32, Shape{3, 4}), ids},
                      {{"num_embeddings", int64_t{10}}}, {absl::StrCat("id ", bad), "V = 10"});
  }
  Tensor ids32 = Tensor::FromVector<int32_t>({1}, {12});
  t_.ExpectRunFails("embedding", {table, ids32}, {}, {"id 12", "V = 10"});
}

TEST_F(EmbeddingTest, GradientsMatchNumerical) {
  Tensor table = RandomTensor(DataType::kFloat64, {6, 4}, 5);
  Tensor ids = Tensor::FromVector<int64_t>({2, 3}, {1, 5, 1, 0, 3, 1});  // repeats and unused rows
  t_.ExpectGradientsMatch("embedding", {table, ids});
  auto grads = t_.RunGrad("embedding", {table, ids}, {}, {RandomTensor(DataType::kFloat64, {2, 3, 4}, 6)},
                          {true, false});
  ASSERT_TRUE(grads.ok()) << grads.status();
  EXPECT_FALSE((*grads)[1].defined()) << "ids have no gradient";
}

TEST_F(EmbeddingTest, AllSbpSignatures) {
  // V = 7, D = 5, ids [5, 7]: every signature is valid on 3 devices and on [2, 2].
  Tensor table = RandomTensor(DataType::kFloat64, {7, 5}, 7);
  Tensor ids = RandomTensor(DataType::kInt64, {5, 7}, 8, 0, 7);
  // ids S(0), S(1); table S(1), S(0), P; B: 6 + 36.
  EXPECT_EQ(t_.ExpectAllSbpSignaturesMatch("embedding", {table, ids}), 6 + 36);
  Tensor ids32 = RandomTensor(DataType::kInt32, {5, 7}, 9, 0, 7);
  EXPECT_EQ(t_.ExpectAllSbpSignaturesMatch("embedding", {table, ids32}), 6 + 36);

  Tensor dy = RandomTensor(DataType::kFloat64, {5, 7, 5}, 10);
  // dy/ids S(0), S(1); dy S(2); -> S(0); P; B: 6 + 36.
  EXPECT_EQ(t_.ExpectAllSbpSignaturesMatch("embedding_grad", {dy, ids}, {{"num_embeddings", int64_t{7}}}), 6 + 36);
}

TEST_F(EmbeddingTest, BadInputsNameTheOpAndShapes) {
  Tensor table(DataType::kFloat32, Shape{10, 4});
  Tensor ids = Tensor::FromVector<int64_t>({2}, {1, 2});
  t_.ExpectRunFails("embedding", {Tensor(DataType::kFloat32, Shape{10}), ids}, {}, {"table", "float32[10]"});
  t_.ExpectRunFails("embedding", {table, Tensor(DataType::kFloat32, Shape{2})}, {}, {"ids", "float32[2]"});
  t_.ExpectRunFails("embedding_grad", {Tensor(DataType::kFloat32, Shape{3, 4}), ids}, {{"num_embeddings", int64_t{10}}},
                    {"float32[3,4]", "int64[2]"});
  t_.ExpectRunFails("embedding_grad", {Tensor(DataType::kFloat32, Shape{2, 4}), ids}, {{"num_embeddings", int64_t{-3}}},
                    {"num_embeddings", "-3"});
  t_.ExpectRunFails("embedding_grad", {Tensor(DataType::kFloat32, Shape{2, 4}), ids}, {}, {"num_embeddings"});
}

}  // namespace
}  // namespace oneflow_like
