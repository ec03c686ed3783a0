// checkpoint_format.h against hand-computed references: the CRC-32C check value, the worked
// box example of the header, run merging, and the file helpers' errors.
#include "oneflow_like/train/checkpoint_format.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <tuple>
#include <vector>

#include "gtest/gtest.h"

namespace oneflow_like {
namespace train {
namespace {

using Runs = std::vector<std::tuple<int64_t, int64_t, int64_t>>;

Runs CollectRuns(const Box& source, const Box& target) {
  Box overlap;
  Runs runs;
  if (!Intersect(source, target, &overlap)) return runs;
  ForEachRun(source, target, overlap, [&](int64_t s, int64_t t, int64_t n) { runs.emplace_back(s, t, n); });
  return runs;
}

TEST(Crc32cTest, MatchesTheStandardCheckValueAndChains) {
  const std::string digits = "123456789";
  EXPECT_EQ(Crc32c(digits.data(), digits.size()), 0xE3069283u);  // RFC 3720 / the CRC catalogue
  EXPECT_EQ(Crc32c(digits.data() + 4, 5, Crc32c(digits.data(), 4)), 0xE3069283u);
  EXPECT_EQ(Crc32c(nullptr, 0), 0u);
  std::string flipped = digits;
  flipped[3] ^= 1;
  EXPECT_NE(Crc32c(flipped.data(), flipped.size()), 0xE3069283u);
}

TEST(BoxTest, HeaderExampleColumnShardToRowShard) {
  // [4, 6] saved as S(1) over 2 ranks, loaded as S(0): rank 1 wants rows 2..3.
  const Box saved0{{0, 0}, {4, 3}}, saved1{{0, 3}, {4, 6}}, target{{2, 0}, {4, 6}};
  EXPECT_EQ(CollectRuns(saved0, target), (Runs{{6, 0, 3}, {9, 6, 3}}));
  EXPECT_EQ(CollectRuns(saved1, target), (Runs{{6, 3, 3}, {9, 9, 3}}));
  EXPECT_EQ(target.Volume(), 12);
  EXPECT_EQ(target.ToString(), "[2:4, 0:6]");
}

TEST(BoxTest, FullTrailingAxesMergeIntoOneRun) {
  // A row split of a [4, 2, 3] tensor: rows 1..2 of the whole tensor are one run of 12.
  const Box whole{{0, 0, 0}, {4, 2, 3}}, rows{{1, 0, 0}, {3, 2, 3}};
  EXPECT_EQ(CollectRuns(whole, rows), (Runs{{6, 0, 12}}));
  // Split on the middle axis: one run per outer index, two outer indices of 3 elements each.
  const Box middle{{0, 1, 0}, {2, 2, 3}};
  EXPECT_EQ(CollectRuns(whole, middle), (Runs{{3, 0, 3}, {9, 3, 3}}));
}

TEST(BoxTest, ScalarsAndDisjointBoxes) {
  EXPECT_EQ(CollectRuns(Box{}, Box{}), (Runs{{0, 0, 1}}));
  EXPECT_EQ(Box{}.Volume(), 1);
  Box overlap;
  EXPECT_FALSE(Intersect(Box{{0}, {3}}, Box{{3}, {6}}, &overlap));
  EXPECT_EQ(BoxFromProto(BoxToProto(Box{{1, 2}, {3, 4}})), (Box{{1, 2}, {3, 4}}));
}

TEST(FileTest, AtomicWriteReadBackAndTruncation) {
  const std::string dir = ::testing::TempDir() + "/checkpoint_format_test";
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/file.bin";
  ASSERT_TRUE(WriteFileAtomically(path, "first").ok());
  ASSERT_TRUE(WriteFileAtomically(path, "second contents").ok());
  absl::StatusOr<std::string> bytes = ReadWholeFile(path);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  EXPECT_EQ(*bytes, "second contents");
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    EXPECT_EQ(entry.path().filename().string().find(".tmp"), std::string::npos) << "temporary left behind";
  }
  absl::StatusOr<ReadOnlyFile> file = ReadOnlyFile::Open(path);
  ASSERT_TRUE(file.ok());
  char buffer[8];
  ASSERT_TRUE(file->ReadAt(7, 8, buffer).ok());
  EXPECT_EQ(std::string(buffer, 8), "contents");
  absl::Status past_end = file->ReadAt(10, 8, buffer);
  EXPECT_EQ(past_end.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(past_end.message().find("truncated file"), std::string::npos) << past_end;
  EXPECT_NE(past_end.message().find(path), std::string::npos) << past_end;
  EXPECT_EQ(ReadWholeFile(dir + "/absent").status().code(), absl::StatusCode::kNotFound);
}

TEST(FileTest, AnUncommittedWriterLeavesTheOldFileAndNoTemporary) {
  const std::string dir = ::testing::TempDir() + "/checkpoint_format_test_uncommitted";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/file.bin";
  ASSERT_TRUE(WriteFileAtomically(path, "old").ok());
  {
    absl::StatusOr<AtomicFileWriter> writer = AtomicFileWriter::Open(path);
    ASSERT_TRUE(writer.ok()) << writer.status();
    ASSERT_TRUE(writer->Append("new, but the writer dies before Commit").ok());
  }
  EXPECT_EQ(*ReadWholeFile(path), "old");
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) files += entry.is_regular_file();
  EXPECT_EQ(files, 1);
  absl::StatusOr<AtomicFileWriter> writer = AtomicFileWriter::Open(path);
  ASSERT_TRUE(writer.ok());
  ASSERT_TRUE(writer->Append("ne").ok());
  ASSERT_TRUE(writer->Append("w").ok());
  ASSERT_TRUE(writer->Commit().ok());
  EXPECT_EQ(*ReadWholeFile(path), "new");
  EXPECT_EQ(writer->Commit().code(), absl::StatusCode::kInternal);
}

}  // namespace
}  // namespace train
}  // namespace oneflow_like
