// The peaks the floors (step_floor.h) divide by: measured_peaks.h on the
// host (the GPU figures come from the GPU scripts).
#include "seam/runtime/measured_peaks.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "seam/testing/tiny_checkpoint.h"

namespace seam::runtime {
namespace {

// Both data kinds time a real matmul; an empty shape is refused.
TEST(MeasuredPeaks, MatmulRatesOnRandomAndConstantDataArePositive) {
  const MatmulShape shape{64, 96, 128, "small"};
  for (MatmulData data : {MatmulData::kRandom, MatmulData::kConstant}) {
    absl::StatusOr<double> rate = MatmulFlopsPerSecond(Device::CPU(), DType::kF32, shape, data);
    ASSERT_TRUE(rate.ok()) << rate.status();
    EXPECT_GT(*rate, 0);
  }
  EXPECT_EQ(MatmulFlopsPerSecond(Device::CPU(), DType::kF32, {0, 8, 8, "empty"}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(MeasuredPeaks, BestRateIsTheLargestOfTheSquareAndTheModelsShapes) {
  absl::StatusOr<MatmulPeak> peak =
      BestMatmulFlopsPerSecond(Device::CPU(), DType::kF32, testing::TinyConfig(/*moe=*/false), 16);
  ASSERT_TRUE(peak.ok()) << peak.status();
  ASSERT_GE(peak->rates.size(), 5u);
  EXPECT_STREQ(peak->rates.front().first.name, "square");
  double best = 0;
  for (const auto& [shape, rate] : peak->rates) best = std::max(best, rate);
  EXPECT_EQ(peak->flops_per_s, best);
}

}  // namespace
}  // namespace seam::runtime
