// HolderDeviceBody: the absorption of an update written in place finishes
// at once, without the backend's copy body (which would wait for the device stream to drain);
// an update in other bytes is copied by the wrapped body.
#include "oneflow_like/actor/holder_body.h"

#include <memory>
#include <vector>

#include "gtest/gtest.h"

namespace oneflow_like {
namespace actor {
namespace {

// Stands for the backend's copy body: counts its starts, finishes when told to.
class RecordingCopy final : public ActBody {
 public:
  absl::Status Act(ActIo& io) override {
    ++acts;
    (void)io;
    return absl::OkStatus();
  }
  bool IsAsync() const override { return true; }
  void Start(ActIo io, std::function<void(const absl::Status&)> finished) override {
    ++starts;
    (void)io;
    pending = std::move(finished);
  }
  bool OnDeviceStream(int32_t* device, int32_t* stream) const override {
    *device = 1;
    *stream = 3;
    return true;
  }
  int starts = 0, acts = 0;
  std::function<void(const absl::Status&)> pending;
};

TensorDesc Desc() { return TensorDesc{DataType::kFloat32, Shape({4})}; }

TEST(HolderDeviceBodyTest, InPlaceUpdateFinishesWithoutTheDevice) {
  auto copy = std::make_unique<RecordingCopy>();
  RecordingCopy* inner = copy.get();
  HolderDeviceBody body(std::move(copy));
  std::vector<float> variable(4);
  int finished = 0;
  // The absorption of an update written in place: the input is the output's bytes.
  ActIo absorb{{Tensor::Borrow(Desc(), variable.data())}, {Tensor::Borrow(Desc(), variable.data())}};
  body.Start(absorb, [&](const absl::Status& s) {
    EXPECT_TRUE(s.ok());
    ++finished;
  });
  EXPECT_EQ(finished, 1) << "finished at once";
  // No inputs (the actor emits without its body, but the body would not reach the device).
  ActIo emit{{}, {Tensor::Borrow(Desc(), variable.data())}};
  body.Start(emit, [&](const absl::Status&) { ++finished; });
  EXPECT_EQ(finished, 2);
  EXPECT_EQ(inner->starts, 0) << "nothing reached the device";
  ActIo sync_absorb = absorb;
  EXPECT_TRUE(body.Act(sync_absorb).ok());
  EXPECT_EQ(inner->acts, 0);
  int32_t device = 0, stream = 0;
  ASSERT_TRUE(body.OnDeviceStream(&device, &stream));
  EXPECT_EQ(device, 1);
  EXPECT_EQ(stream, 3);
}

TEST(HolderDeviceBodyTest, AnUpdateInOtherBytesIsCopiedByTheDevice) {
  auto copy = std::make_unique<RecordingCopy>();
  RecordingCopy* inner = copy.get();
  HolderDeviceBody body(std::move(copy));
  std::vector<float> variable(4), update(4);
  int finished = 0;
  ActIo absorb{{Tensor::Borrow(Desc(), update.data())}, {Tensor::Borrow(Desc(), variable.data())}};
  body.Start(absorb, [&](const absl::Status&) { ++finished; });
  EXPECT_EQ(inner->starts, 1);
  EXPECT_EQ(finished, 0) << "waits for the device copy";
  ASSERT_TRUE(inner->pending);
  inner->pending(absl::OkStatus());
  EXPECT_EQ(finished, 1);
  // An empty update has nothing to copy.
  const TensorDesc empty{DataType::kFloat32, Shape({0})};
  ActIo nothing{{Tensor::Borrow(empty, update.data())}, {Tensor::Borrow(empty, variable.data())}};
  body.Start(nothing, [&](const absl::Status&) { ++finished; });
  EXPECT_EQ(finished, 2);
  EXPECT_EQ(inner->starts, 1);
}

}  // namespace
}  // namespace actor
}  // namespace oneflow_like
