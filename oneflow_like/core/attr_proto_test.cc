#include "oneflow_like/core/attr_proto.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace oneflow_like {
namespace {

using ::testing::HasSubstr;

TEST(AttrProtoTest, EveryAttrTypeRoundTrips) {
  const std::vector<AttrValue> values = {AttrValue(int64_t{-7}),
                                         AttrValue(0.25),
                                         AttrValue(true),
                                         AttrValue(std::string("gelu")),
                                         AttrValue(std::vector<int64_t>{1, 2, 3}),
                                         AttrValue(std::vector<double>{0.5, -1.5}),
                                         AttrValue(DataType::kBFloat16)};
  for (const AttrValue& v : values) {
    AttrValueProto proto = AttrValueToProto(v);
    absl::StatusOr<AttrValue> back = AttrValueFromProto(proto);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(*back, v) << AttrValueToString(v);
  }
  EXPECT_EQ(AttrValueToProto(AttrValue(int64_t{3})).i(), 3);
  EXPECT_EQ(AttrValueToProto(AttrValue(DataType::kInt32)).dtype(), DT_INT32);
}

// Regression: an empty list (fill's shape=[] for a scalar, e.g. the loss gradient seed) used
// to leave the oneof unset, so the runtime rejected the compiled task's attribute.
TEST(AttrProtoTest, EmptyListsRoundTrip) {
  for (const AttrValue& v : {AttrValue(std::vector<int64_t>{}), AttrValue(std::vector<double>{})}) {
    AttrValueProto proto = AttrValueToProto(v);
    EXPECT_NE(proto.value_case(), AttrValueProto::VALUE_NOT_SET) << AttrValueToString(v);
    absl::StatusOr<AttrValue> back = AttrValueFromProto(proto);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(*back, v) << AttrValueToString(v);
  }
}

TEST(AttrProtoTest, RejectsEmptyAndInvalidValues) {
  absl::StatusOr<AttrValue> empty = AttrValueFromProto(AttrValueProto());
  EXPECT_EQ(empty.status().code(), absl::StatusCode::kInvalidArgument);
  AttrValueProto bad_dtype;
  bad_dtype.set_dtype(DT_INVALID);
  EXPECT_EQ(AttrValueFromProto(bad_dtype).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(DataTypeFromProto(99).ok());
}

TEST(AttrProtoTest, TensorDescRoundTripsAndRejectsNegativeDims) {
  TensorDesc desc{DataType::kFloat64, Shape{2, 0, 5}};
  absl::StatusOr<TensorDesc> back = TensorDescFromProto(TensorDescToProto(desc));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, desc);
  TensorDescProto negative = TensorDescToProto(desc);
  negative.set_dims(1, -3);
  EXPECT_FALSE(TensorDescFromProto(negative).ok());
}

TEST(AttrProtoTest, MapRoundTripsAndNamesTheBadAttribute) {
  AttrMap attrs{{"lr", 0.1}, {"axes", std::vector<int64_t>{0, 1}}};
  google::protobuf::Map<std::string, AttrValueProto> proto;
  AttrMapToProto(attrs, &proto);
  EXPECT_EQ(proto.size(), 2u);
  absl::StatusOr<AttrMap> back = AttrMapFromProto(proto);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, attrs);
  proto["broken"] = AttrValueProto();
  absl::StatusOr<AttrMap> bad = AttrMapFromProto(proto);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("'broken'"));
}

}  // namespace
}  // namespace oneflow_like
