#include "tools/train/cuda_device_choice.h"

#include <string>

#include "gtest/gtest.h"

namespace oneflow_like {
namespace {

std::string Message(const absl::StatusOr<int>& s) { return std::string(s.status().message()); }

TEST(ChooseCudaDevice, LocalRankWithAllDevicesVisible) {
  EXPECT_EQ(*ChooseCudaDevice(nullptr, "3", nullptr, 8), 3);
  EXPECT_EQ(*ChooseCudaDevice(nullptr, "1", "0,1,2,3", 4), 1);
  EXPECT_EQ(*ChooseCudaDevice(nullptr, nullptr, nullptr, 8), 0);
  EXPECT_EQ(*ChooseCudaDevice(nullptr, "", nullptr, 8), 0);
}

// One GPU per process through CUDA_VISIBLE_DEVICES: the process's device is 0 for every rank.
TEST(ChooseCudaDevice, OneVisibleDevicePerProcessIsOrdinalZero) {
  EXPECT_EQ(*ChooseCudaDevice(nullptr, "0", "0", 1), 0);
  EXPECT_EQ(*ChooseCudaDevice(nullptr, "1", "1", 1), 0);
  EXPECT_EQ(*ChooseCudaDevice(nullptr, "7", "7", 1), 0);
  EXPECT_EQ(*ChooseCudaDevice(nullptr, "5", "GPU-8f3e2c1a", 1), 0);
}

TEST(ChooseCudaDevice, ALocalRankPastTheVisibleDevicesIsAnErrorNamingThem) {
  const absl::StatusOr<int> s = ChooseCudaDevice(nullptr, "2", "0,1", 2);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(Message(s).find("LOCAL_RANK=2"), std::string::npos) << s.status();
  EXPECT_NE(Message(s).find("sees 2 CUDA device(s)"), std::string::npos) << s.status();
  EXPECT_NE(Message(s).find("CUDA_VISIBLE_DEVICES='0,1'"), std::string::npos) << s.status();
  const absl::StatusOr<int> unset = ChooseCudaDevice(nullptr, "1", nullptr, 1);
  ASSERT_FALSE(unset.ok());
  EXPECT_NE(Message(unset).find("CUDA_VISIBLE_DEVICES unset"), std::string::npos) << unset.status();
}

TEST(ChooseCudaDevice, OlCudaDeviceWinsAndIsChecked) {
  EXPECT_EQ(*ChooseCudaDevice("2", "5", nullptr, 4), 2);
  EXPECT_EQ(*ChooseCudaDevice("0", "5", "5", 1), 0);
  const absl::StatusOr<int> s = ChooseCudaDevice("4", nullptr, nullptr, 4);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(Message(s).find("OL_CUDA_DEVICE=4"), std::string::npos) << s.status();
}

TEST(ChooseCudaDevice, GarbageAndNoDevices) {
  EXPECT_EQ(ChooseCudaDevice(nullptr, "x", nullptr, 2).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ChooseCudaDevice("-1", nullptr, nullptr, 2).status().code(), absl::StatusCode::kInvalidArgument);
  const absl::StatusOr<int> none = ChooseCudaDevice(nullptr, "0", "", 0);
  EXPECT_EQ(none.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(Message(none).find("CUDA_VISIBLE_DEVICES=''"), std::string::npos) << none.status();
}

}  // namespace
}  // namespace oneflow_like
