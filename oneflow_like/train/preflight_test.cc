// The pieces of the preflight checks; RunPreflight itself runs under olrun in
// tests/multiprocess (a node with another checkpoint directory, binary or too little memory).
#include "oneflow_like/train/preflight.h"

#include <cstdlib>
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace oneflow_like {
namespace train {
namespace {

using ::testing::HasSubstr;

TEST(PreflightTest, FingerprintIsTheCrcAndSizeOfTheFile) {
  const std::string path = std::string(std::getenv("TEST_TMPDIR") ? std::getenv("TEST_TMPDIR") : "/tmp") + "/fp.bin";
  { std::ofstream(path) << "123456789"; }  // CRC-32C check value of "123456789": e3069283
  EXPECT_EQ(FileFingerprint(path).value(), "crc32c:e3069283 size:9");
  { std::ofstream(path, std::ios::app) << "!"; }
  EXPECT_NE(FileFingerprint(path).value(), "crc32c:e3069283 size:9");
  EXPECT_EQ(FileFingerprint(path + ".missing").status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(FileFingerprint("/proc/self/exe").ok());
}

TEST(PreflightTest, ParsesMemAvailable) {
  EXPECT_EQ(ParseMemAvailable("MemTotal:       16310060 kB\nMemFree:  1 kB\nMemAvailable:   12000 kB\n").value(),
            12000 * 1024);
  EXPECT_EQ(ParseMemAvailable("MemTotal: 5 kB\n").status().code(), absl::StatusCode::kNotFound);
  const absl::Status bad = ParseMemAvailable("MemAvailable: lots\n").status();
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.message()), HasSubstr("malformed /proc/meminfo line 'MemAvailable: lots'"));
}

TEST(PreflightTest, MemoryAvailableCanBeOverriddenForTests) {
  unsetenv("OL_MEM_AVAILABLE_BYTES");
  EXPECT_GT(NodeMemoryAvailable().value(), 0);  // this machine's MemAvailable
  setenv("OL_MEM_AVAILABLE_BYTES", "4096", 1);
  EXPECT_EQ(NodeMemoryAvailable().value(), 4096);
  setenv("OL_MEM_AVAILABLE_BYTES", "4 GB", 1);
  EXPECT_THAT(std::string(NodeMemoryAvailable().status().message()),
              HasSubstr("OL_MEM_AVAILABLE_BYTES='4 GB': expected a byte count >= 0"));
  unsetenv("OL_MEM_AVAILABLE_BYTES");
}

TEST(PreflightTest, PlannedBytesOfANodeSumItsRanks) {
  PlanProto plan;
  for (int rank = 0; rank < 4; ++rank) {
    RankMemoryProto* memory = plan.add_memory();
    memory->set_rank(rank);
    memory->set_planned_bytes(100 * (rank + 1));
  }
  EXPECT_EQ(PlannedBytesOfRanks(plan, 0, 2), 300);  // node 0 of 2 x 2: ranks 0, 1
  EXPECT_EQ(PlannedBytesOfRanks(plan, 2, 2), 700);  // node 1: ranks 2, 3
  EXPECT_EQ(PlannedBytesOfRanks(plan, 0, 4), 1000);
  // A rank with GPU blocks: only its host blocks count against the node's RAM.
  RankMemoryProto* gpu = plan.mutable_memory(0);
  gpu->set_planned_bytes(5000);
  DeviceMemoryProto* host = gpu->add_devices();
  host->mutable_device()->set_type("cpu");
  host->set_planned_bytes(40);
  DeviceMemoryProto* cuda = gpu->add_devices();
  cuda->mutable_device()->set_type("cuda");
  cuda->set_planned_bytes(4960);
  EXPECT_EQ(PlannedBytesOfRanks(plan, 0, 2), 40 + 200);
}

TEST(PreflightTest, RecognizesPreflightFailuresAlsoWhenRelayed) {
  EXPECT_TRUE(IsPreflightFailure(absl::FailedPreconditionError("preflight: node 1 (host h, rank 1): x")));
  EXPECT_TRUE(IsPreflightFailure(
      absl::AbortedError("rank 1 (host h, pid 7) aborted the job before reporting any step: preflight: node 1 ...")));
  EXPECT_FALSE(IsPreflightFailure(absl::UnavailableError("rank 1 died")));
}

}  // namespace
}  // namespace train
}  // namespace oneflow_like
