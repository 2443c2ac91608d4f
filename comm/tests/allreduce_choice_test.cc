// ChooseFusedAllReduce: the fused path is chosen only where measured no slower.
#include "seam/comm/allreduce_choice.h"

#include <limits>

#include <gtest/gtest.h>

namespace seam::comm {
namespace {

TEST(AllReduceChoiceTest, ExactEntriesDecideByMeasurement) {
  AllReduceNormTable t;
  t[{1, 4096}] = {10.0, 20.0};
  t[{64, 4096}] = {15.0, 15.0};  // a tie counts as not slower
  t[{256, 4096}] = {40.0, 30.0};
  EXPECT_TRUE(ChooseFusedAllReduce(1, 4096, t));
  EXPECT_TRUE(ChooseFusedAllReduce(64, 4096, t));
  EXPECT_FALSE(ChooseFusedAllReduce(256, 4096, t));
}

TEST(AllReduceChoiceTest, UnmeasuredSizesNeedBothNeighboursToFavourFusion) {
  AllReduceNormTable t;
  t[{1, 4096}] = {10.0, 20.0};
  t[{7, 4096}] = {11.0, 20.0};
  t[{64, 4096}] = {30.0, 25.0};
  t[{1, 8192}] = {12.0, 22.0};
  EXPECT_TRUE(ChooseFusedAllReduce(4, 4096, t));
  EXPECT_FALSE(ChooseFusedAllReduce(20, 4096, t));   // 64 is slower fused
  EXPECT_FALSE(ChooseFusedAllReduce(128, 4096, t));  // beyond the measured range
  EXPECT_FALSE(ChooseFusedAllReduce(4, 8192, t));    // no upper neighbour at this hidden
  EXPECT_FALSE(ChooseFusedAllReduce(4, 6144, t));    // hidden never measured
  EXPECT_FALSE(ChooseFusedAllReduce(1, 4096, {}));
  EXPECT_FALSE(ChooseFusedAllReduce(0, 4096, t));
}

TEST(AllReduceChoiceTest, InvalidTimingsCountAsMissing) {
  AllReduceNormTable t;
  t[{1, 4096}] = {0.0, 20.0};
  t[{7, 4096}] = {std::numeric_limits<double>::quiet_NaN(), 20.0};
  t[{8, 4096}] = {5.0, 9.0};
  t[{16, 4096}] = {5.0, 9.0};
  EXPECT_FALSE(ChooseFusedAllReduce(1, 4096, t));
  EXPECT_FALSE(ChooseFusedAllReduce(7, 4096, t));
  EXPECT_FALSE(ChooseFusedAllReduce(4, 4096, t));  // no valid lower neighbour
  EXPECT_TRUE(ChooseFusedAllReduce(12, 4096, t));
}

}  // namespace
}  // namespace seam::comm
