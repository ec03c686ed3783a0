#include "oneflow_like/models/text_data.h"

#include <cstdio>
#include <fstream>
#include <set>

#include "gtest/gtest.h"

namespace oneflow_like {
namespace models {
namespace {

TEST(TextCorpusTest, WindowsAreSubstringsAndTargetsShiftByOne) {
  std::string text;
  for (int i = 0; i < 1000; ++i) text.push_back(static_cast<char>('a' + (i * 7) % 26));
  TextCorpus corpus = TextCorpus::FromString(text);
  TokenBatch b = corpus.Batch(3, 8, 16, 5);
  ASSERT_EQ(b.inputs.shape(), (Shape{8, 16}));
  std::set<int64_t> firsts;
  for (int64_t i = 0; i < 8; ++i) {
    std::string window, next;
    for (int64_t t = 0; t < 16; ++t) {
      window.push_back(static_cast<char>(b.inputs.data<int64_t>()[i * 16 + t]));
      next.push_back(static_cast<char>(b.targets.data<int64_t>()[i * 16 + t]));
    }
    const size_t at = text.find(window + next.back());
    ASSERT_NE(at, std::string::npos) << "window " << i << " is not a substring of the corpus";
    EXPECT_EQ(next, text.substr(at + 1, 16));
    firsts.insert(b.inputs.data<int64_t>()[i * 16]);
  }
  EXPECT_GT(firsts.size(), 1u) << "all windows start with the same token: not random offsets";
}

TEST(TextCorpusTest, DeterministicPerStepAndDifferentAcrossSteps) {
  std::string text(5000, 'x');
  for (size_t i = 0; i < text.size(); ++i) text[i] = static_cast<char>(i * 31 % 251);
  TextCorpus corpus = TextCorpus::FromString(text);
  TokenBatch a = corpus.Batch(7, 4, 32, 1), again = corpus.Batch(7, 4, 32, 1), other = corpus.Batch(8, 4, 32, 1);
  EXPECT_EQ(a.inputs.ToVector<int64_t>(), again.inputs.ToVector<int64_t>());
  EXPECT_NE(a.inputs.ToVector<int64_t>(), other.inputs.ToVector<int64_t>());
  EXPECT_NE(a.inputs.ToVector<int64_t>(), corpus.Batch(7, 4, 32, 2).inputs.ToVector<int64_t>());
}

TEST(TextCorpusTest, LoadErrorsNameThePath) {
  absl::StatusOr<TextCorpus> missing = TextCorpus::Load("/nonexistent/corpus.txt", 10);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("/nonexistent/corpus.txt"), std::string::npos);
  const std::string path = std::string(getenv("TEST_TMPDIR") ? getenv("TEST_TMPDIR") : "/tmp") + "/tiny.txt";
  { std::ofstream(path) << "abc"; }
  absl::StatusOr<TextCorpus> tiny = TextCorpus::Load(path, 33);
  ASSERT_FALSE(tiny.ok());
  EXPECT_NE(tiny.status().message().find("3 bytes"), std::string::npos) << tiny.status();
  absl::StatusOr<TextCorpus> ok = TextCorpus::Load(path, 3);
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok->size(), 3);
}

}  // namespace
}  // namespace models
}  // namespace oneflow_like
