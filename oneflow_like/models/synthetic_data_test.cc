// SyntheticBatch against torch_gpt.py's synthetic_batch. Expected values produced by
//   cd tools/bench/peers && /usr/bin/python3 -c "from torch_gpt import synthetic_batch, GptDims
//   c=GptDims(vocab=64, seq_len=16)
//   for step,seed in [(0,0),(3,5)]:
//     i,t=synthetic_batch(step,2,c,seed); print(step,seed,i.tolist(),t[:,-1].tolist())
//   i,t=synthetic_batch(7,8); print(i[:,:4].tolist(), t[:,-1].tolist())"
#include "oneflow_like/models/synthetic_data.h"

#include <vector>

#include "gtest/gtest.h"

namespace oneflow_like {
namespace models {
namespace {

std::vector<int64_t> Row(const Tensor& t, int64_t row, int64_t count) {
  const int64_t width = t.shape().dim(1);
  return std::vector<int64_t>(t.data<int64_t>() + row * width, t.data<int64_t>() + row * width + count);
}

TEST(SyntheticDataTest, TinyConfigMatchesTorchGptPy) {
  const GptConfig c{.vocab = 64, .seq_len = 16};
  TokenBatch b = SyntheticBatch(0, 2, c, 0);
  ASSERT_EQ(b.inputs.desc(), (TensorDesc{DataType::kInt64, Shape{2, 16}}));
  ASSERT_EQ(b.targets.desc(), (TensorDesc{DataType::kInt64, Shape{2, 16}}));
  EXPECT_EQ(Row(b.inputs, 0, 16), (std::vector<int64_t>{16, 24, 32, 40, 48, 56, 0, 8, 16, 24, 32, 40, 48, 56, 0, 8}));
  EXPECT_EQ(Row(b.inputs, 1, 16), (std::vector<int64_t>{29, 36, 43, 50, 57, 0, 7, 14, 21, 28, 35, 42, 49, 56, 63, 6}));
  EXPECT_EQ(b.targets.data<int64_t>()[15], 16);
  EXPECT_EQ(b.targets.data<int64_t>()[31], 13);
  // targets are the inputs shifted by one.
  for (int64_t r = 0; r < 2; ++r) {
    for (int64_t t = 0; t + 1 < 16; ++t) EXPECT_EQ(Row(b.targets, r, 16)[t], Row(b.inputs, r, 16)[t + 1]);
  }

  b = SyntheticBatch(3, 2, c, 5);
  EXPECT_EQ(Row(b.inputs, 0, 16), (std::vector<int64_t>{59, 1, 7, 13, 19, 25, 31, 37, 43, 49, 55, 61, 3, 9, 15, 21}));
  EXPECT_EQ(Row(b.inputs, 1, 16), (std::vector<int64_t>{4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30, 32, 34}));
  EXPECT_EQ(b.targets.data<int64_t>()[15], 27);
  EXPECT_EQ(b.targets.data<int64_t>()[31], 36);
}

TEST(SyntheticDataTest, W2ConfigMatchesTorchGptPy) {
  TokenBatch b = SyntheticBatch(7, 8, GptConfig{});  // vocab 2048, seq_len 128, seed 0
  const std::vector<std::vector<int64_t>> heads = {{951, 956, 961, 966},     {185, 190, 195, 200},
                                                   {1496, 1503, 1510, 1517}, {308, 310, 312, 314},
                                                   {219, 221, 223, 225},     {1455, 1458, 1461, 1464},
                                                   {121, 124, 127, 130},     {1564, 1569, 1574, 1579}};
  const std::vector<int64_t> last = {1591, 825, 344, 564, 475, 1839, 505, 156};
  for (int64_t r = 0; r < 8; ++r) {
    EXPECT_EQ(Row(b.inputs, r, 4), heads[r]) << "row " << r;
    EXPECT_EQ(Row(b.targets, r, 128)[127], last[r]) << "row " << r;
  }
}

}  // namespace
}  // namespace models
}  // namespace oneflow_like
