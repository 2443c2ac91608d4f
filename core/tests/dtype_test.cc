#include "seam/core/dtype.h"

#include <cmath>

#include <gtest/gtest.h>

namespace seam {
namespace {

TEST(DType, BF16RoundsToNearestEven) {
  EXPECT_EQ(BF16ToFloat(FloatToBF16(1.0f)), 1.0f);
  // 1 + 2^-8 is exactly halfway between bf16 neighbours 1 and 1 + 2^-7: ties to even (1).
  EXPECT_EQ(BF16ToFloat(FloatToBF16(1.0f + std::ldexp(1.0f, -8))), 1.0f);
  EXPECT_EQ(BF16ToFloat(FloatToBF16(1.0f + 3 * std::ldexp(1.0f, -8))), 1.0f + std::ldexp(1.0f, -6));
  EXPECT_TRUE(std::isnan(BF16ToFloat(FloatToBF16(std::nanf("")))));
}

TEST(DType, F16RoundTripsRepresentableValuesAndSubnormals) {
  for (float v : {0.0f, 1.0f, -2.5f, 65504.0f, 0.000061035156f, 5.9604645e-08f, 0.333251953125f}) {
    EXPECT_EQ(F16ToFloat(FloatToF16(v)), v) << v;
  }
  EXPECT_TRUE(std::isinf(F16ToFloat(FloatToF16(1e6f))));
}

TEST(DType, ParseNamesAndRejectUnknown) {
  EXPECT_EQ(*ParseDType("bfloat16"), DType::kBF16);
  EXPECT_EQ(*ParseDType("f32"), DType::kF32);
  auto bad = ParseDType("float13");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("float13"), std::string::npos);
}

TEST(DType, F8E4M3SaturatesAndRoundTrips) {
  float buf_in[3] = {1.0f, 448.0f, 1000.0f};
  uint8_t buf[3];
  for (int i = 0; i < 3; ++i) StoreFromFloat(buf, DType::kF8E4M3, i, buf_in[i]);
  EXPECT_EQ(LoadAsFloat(buf, DType::kF8E4M3, 0), 1.0f);
  EXPECT_EQ(LoadAsFloat(buf, DType::kF8E4M3, 1), 448.0f);
  EXPECT_EQ(LoadAsFloat(buf, DType::kF8E4M3, 2), 448.0f);
}

}  // namespace
}  // namespace seam
