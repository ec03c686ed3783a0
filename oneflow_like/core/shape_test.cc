#include "oneflow_like/core/shape.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace oneflow_like {
namespace {

using ::testing::HasSubstr;

TEST(ShapeTest, CountsAndStrides) {
  Shape s{2, 3, 4};
  EXPECT_EQ(s.num_axes(), 3);
  EXPECT_EQ(s.elem_count(), 24);
  EXPECT_EQ(s.Strides(), std::vector<int64_t>({12, 4, 1}));
  EXPECT_EQ(s.Count(1), 12);
  EXPECT_EQ(s.Count(0, 2), 6);
  EXPECT_EQ(s.Count(2, 2), 1);
  EXPECT_EQ(s[1], 3);
  EXPECT_EQ(s.dim(2), 4);
  s.set_dim(1, 5);
  EXPECT_EQ(s, (Shape{2, 5, 4}));
  EXPECT_EQ(s.Strides(), std::vector<int64_t>({20, 4, 1}));

  Shape scalar;
  EXPECT_EQ(scalar.num_axes(), 0);
  EXPECT_EQ(scalar.elem_count(), 1);  // a scalar holds one element
  EXPECT_TRUE(scalar.Strides().empty());
  EXPECT_EQ((Shape{3, 0, 2}).elem_count(), 0);
  EXPECT_EQ((Shape{3, 0, 2}).Strides(), std::vector<int64_t>({0, 2, 1}));
}

TEST(ShapeTest, PrintsAndParses) {
  EXPECT_EQ((Shape{64, 128}).ToString(), "[64,128]");
  EXPECT_EQ(Shape().ToString(), "[]");
  EXPECT_EQ(*Shape::Parse("[64, 128]"), (Shape{64, 128}));
  EXPECT_EQ(*Shape::Parse("64,128"), (Shape{64, 128}));
  EXPECT_EQ(*Shape::Parse(" [ 7 ] "), (Shape{7}));
  EXPECT_EQ(*Shape::Parse("[]"), Shape());
  EXPECT_EQ(*Shape::Parse(""), Shape());
  EXPECT_EQ(*Shape::Parse("[0,3]"), (Shape{0, 3}));
  for (const Shape& s : {Shape(), Shape{1}, Shape{0}, Shape{2, 3, 4, 5}, Shape{1000000, 1}}) {
    auto parsed = Shape::Parse(s.ToString());
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(*parsed, s);
  }
}

TEST(ShapeTest, ParseErrorsQuoteTheText) {
  struct Case {
    const char* text;
    const char* expect;
  };
  for (const Case& c : {Case{"[2,-3]", "'-3' is not a non-negative integer"}, Case{"[2,x]", "'x'"},
                        Case{"[2,3", "missing ']'"}, Case{"[2,,3]", "''"}, Case{"2.5", "'2.5'"}}) {
    auto r = Shape::Parse(c.text);
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(r.status().message()), HasSubstr(c.expect)) << c.text;
    EXPECT_THAT(std::string(r.status().message()), HasSubstr(c.text));
  }
}

TEST(ShapeTest, ValidateRejectsNegativeDims) {
  EXPECT_TRUE((Shape{2, 0}).Validate().ok());
  absl::Status s = Shape{2, -1}.Validate();
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("axis 1"));
}

TEST(ShapeTest, NormalizeAxis) {
  EXPECT_EQ(*NormalizeAxis(0, 3), 0);
  EXPECT_EQ(*NormalizeAxis(2, 3), 2);
  EXPECT_EQ(*NormalizeAxis(-1, 3), 2);
  EXPECT_EQ(*NormalizeAxis(-3, 3), 0);
  for (int64_t bad : {3, -4, 100}) {
    auto r = NormalizeAxis(bad, 3);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(r.status().message()), HasSubstr("axis " + std::to_string(bad)));
    EXPECT_THAT(std::string(r.status().message()), HasSubstr("3 axes"));
  }
  EXPECT_FALSE(NormalizeAxis(0, 0).ok());  // a scalar has no axes
}

TEST(TensorDescTest, ByteSizeToStringAndEquality) {
  TensorDesc d{DataType::kFloat16, Shape{3, 5}};
  EXPECT_EQ(d.byte_size(), 30);
  EXPECT_EQ(d.ToString(), "float16[3,5]");
  EXPECT_EQ((TensorDesc{DataType::kInt64, Shape{}}).byte_size(), 8);
  EXPECT_EQ(d, (TensorDesc{DataType::kFloat16, Shape{3, 5}}));
  EXPECT_NE(d, (TensorDesc{DataType::kBFloat16, Shape{3, 5}}));
  EXPECT_NE(d, (TensorDesc{DataType::kFloat16, Shape{5, 3}}));
}

}  // namespace
}  // namespace oneflow_like
