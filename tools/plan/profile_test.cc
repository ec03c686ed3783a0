// Profiles price host <-> device copies (COPY tasks): the GPU profile's PCIe link from its
// host_device keys, a CPU profile's calibrated memcpy rate when it has none; the keys round-trip
// through SaveProfile / LoadProfile.
#include <cstdlib>
#include <string>

#include "gtest/gtest.h"
#include "oneflow_like/compiler/boxing/cost_model.h"
#include "tools/plan/calibrate.h"

namespace oneflow_like {
namespace plan_tool {
namespace {

TEST(ProfileTest, GpuProfilePricesCopiesOnPcie) {
  absl::StatusOr<Profile> h100 = LoadProfile("tools/plan/profiles/h100.txt");
  ASSERT_TRUE(h100.ok()) << h100.status();
  EXPECT_EQ(h100->host_device_bytes_per_second, 6.4e10);
  EXPECT_EQ(h100->host_device_alpha_seconds, 5e-6);
  compiler::CostConfig cost;
  ApplyProfile(*h100, &cost);
  EXPECT_DOUBLE_EQ(compiler::CopySeconds(int64_t{64} << 20, cost), 5e-6 + (int64_t{64} << 20) / 6.4e10);
  // HBM is far faster than PCIe: the copy is not priced at memory_bytes_per_second.
  EXPECT_GT(compiler::CopySeconds(int64_t{64} << 20, cost), 2.0 * (int64_t{64} << 20) / h100->memory_bytes_per_second);
}

// The profile of oltrain_cuda's default kernels (float32 matmuls without TF32) is h100.txt with
// the FP32 peak: every other figure the same.
TEST(ProfileTest, Fp32ProfileIsTheTf32OneAtTheFp32Peak) {
  absl::StatusOr<Profile> tf32 = LoadProfile("tools/plan/profiles/h100.txt");
  absl::StatusOr<Profile> fp32 = LoadProfile("tools/plan/profiles/h100_fp32.txt");
  ASSERT_TRUE(tf32.ok()) << tf32.status();
  ASSERT_TRUE(fp32.ok()) << fp32.status();
  EXPECT_EQ(fp32->flops_per_second, 6.69e13);
  EXPECT_LT(fp32->flops_per_second * 7, tf32->flops_per_second);
  EXPECT_EQ(fp32->memory_bytes_per_second, tf32->memory_bytes_per_second);
  EXPECT_EQ(fp32->task_overhead_seconds, tf32->task_overhead_seconds);
  EXPECT_EQ(fp32->same_node_bytes_per_second, tf32->same_node_bytes_per_second);
  EXPECT_EQ(fp32->cross_node_bytes_per_second, tf32->cross_node_bytes_per_second);
  EXPECT_EQ(fp32->host_device_bytes_per_second, tf32->host_device_bytes_per_second);
  EXPECT_EQ(fp32->device_per_rank, tf32->device_per_rank);
}

TEST(ProfileTest, CpuProfileWithoutTheKeysCopiesAtTheCalibratedMemcpyRate) {
  Profile cpu;
  cpu.flops_per_second = 5e10;
  cpu.memory_bytes_per_second = 2e10;  // read + write: a copy moves 1e10 bytes per second
  compiler::CostConfig cost;
  ApplyProfile(cpu, &cost);
  EXPECT_DOUBLE_EQ(cost.host_device.beta_seconds_per_byte, 1.0 / 1e10);
  EXPECT_EQ(cost.host_device.alpha_seconds, compiler::CostConfig().host_device.alpha_seconds);
}

TEST(ProfileTest, HostDeviceKeysRoundTrip) {
  Profile p;
  p.flops_per_second = 1e12;
  p.memory_bytes_per_second = 1e11;
  p.host_device_alpha_seconds = 7e-6;
  p.host_device_bytes_per_second = 2.5e10;
  const char* dir = std::getenv("TEST_TMPDIR");
  const std::string path = std::string(dir != nullptr ? dir : "/tmp") + "/profile_test.txt";
  ASSERT_TRUE(SaveProfile(p, path).ok());
  absl::StatusOr<Profile> back = LoadProfile(path);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->host_device_alpha_seconds, 7e-6);
  EXPECT_EQ(back->host_device_bytes_per_second, 2.5e10);
}

TEST(ProfileTest, CacheAndReturnMessageKeysRoundTrip) {
  Profile p;
  p.flops_per_second = 1e12;
  p.memory_bytes_per_second = 1e11;
  p.cache_bytes = 1 << 20;
  p.llc_bytes = 32 << 20;
  p.same_node_message_seconds = 5.2e-6;
  const char* dir = std::getenv("TEST_TMPDIR");
  const std::string path = std::string(dir != nullptr ? dir : "/tmp") + "/profile_cache_test.txt";
  ASSERT_TRUE(SaveProfile(p, path).ok());
  absl::StatusOr<Profile> back = LoadProfile(path);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->cache_bytes, 1 << 20);
  EXPECT_EQ(back->llc_bytes, 32 << 20);
  EXPECT_EQ(back->same_node_message_seconds, 5.2e-6);
}

}  // namespace
}  // namespace plan_tool
}  // namespace oneflow_like
