// The device-side expert ops (seam/kernels/moe_experts.h) on the CPU: routes
// ordered by expert, pairs grouped by expert, each pair's matmul against its
// expert's slice of the stacked weight, the finalize, and the argument checks.
#include <vector>

#include "gtest/gtest.h"
#include "seam/kernels/moe_experts.h"
#include "seam/kernels/ops.h"
#include "tests/reference.h"

namespace seam::kernels {
namespace {

using testing::DTypeParamName;
using testing::Ints;
using testing::RandomTensor;
using testing::Values;

ExpertGroups Grouped(const std::vector<int32_t>& ids, int64_t experts) {
  const int64_t pairs = static_cast<int64_t>(ids.size());
  absl::StatusOr<ExpertGroups> g = ExpertGroups::Empty(experts, pairs, Device::CPU());
  EXPECT_TRUE(g.ok()) << g.status();
  const absl::Status s = GroupByExpert(Tensor::FromInts(ids, {pairs}), *g);
  EXPECT_TRUE(s.ok()) << s;
  return *g;
}

TEST(SortRoutesByExpert, OrdersEachRowByIdCarryingItsWeight) {
  const Tensor ids = Tensor::FromInts({5, 1, 3, 0, 7, 2}, {2, 3});
  const Tensor weights = Tensor::FromFloats({0.5f, 0.3f, 0.2f, 0.6f, 0.25f, 0.15f}, {2, 3});
  ASSERT_TRUE(SortRoutesByExpert(weights, ids).ok());
  EXPECT_EQ(Ints(ids), (std::vector<int32_t>{1, 3, 5, 0, 2, 7}));
  EXPECT_EQ(Values(weights), (std::vector<double>{0.3f, 0.2f, 0.5f, 0.6f, 0.15f, 0.25f}));
}

TEST(GroupByExpert, OffsetsOrderAndActiveExperts) {
  // Pairs 0..7 of a [4, 2] routing; expert 2 has none, 9 is outside [0, 6).
  const ExpertGroups g = Grouped({4, 0, 0, 3, 4, 1, 9, 4}, 6);
  EXPECT_EQ(Ints(g.offsets), (std::vector<int32_t>{0, 2, 3, 3, 4, 7, 7}));
  // The invalid pair is in no group: only the first 7 of the 8 places are filled.
  const std::vector<int32_t> order = Ints(g.order), active = Ints(g.active);
  EXPECT_EQ(std::vector<int32_t>(order.begin(), order.begin() + 7), (std::vector<int32_t>{1, 2, 5, 3, 0, 4, 7}));
  ASSERT_EQ(active.size(), 7u);  // 1 + min(experts, pairs)
  EXPECT_EQ(std::vector<int32_t>(active.begin(), active.begin() + 5), (std::vector<int32_t>{4, 0, 1, 3, 4}));
}

TEST(GroupByExpert, NoPairs) {
  const ExpertGroups g = Grouped({}, 3);
  EXPECT_EQ(Ints(g.offsets), (std::vector<int32_t>{0, 0, 0, 0}));
  EXPECT_EQ(Ints(g.active), (std::vector<int32_t>{0}));
  EXPECT_EQ(Ints(g.tile_starts), (std::vector<int32_t>{0}));
}

// The tensor-core kernel's tiles: ceil(pairs / kExpertTileRows) per active
// expert, summed in active order; zero-pair experts take none.
TEST(GroupByExpert, TileStartsCountEachActiveExpertsTiles) {
  std::vector<int32_t> ids;
  for (int i = 0; i < 130; ++i) ids.push_back(2);  // three tiles
  for (int i = 0; i < 64; ++i) ids.push_back(0);   // exactly one
  ids.push_back(5);                                // one
  const ExpertGroups g = Grouped(ids, 6);
  EXPECT_EQ(Ints(g.active)[0], 3);
  const std::vector<int32_t> tiles = Ints(g.tile_starts);
  EXPECT_EQ(std::vector<int32_t>(tiles.begin(), tiles.begin() + 4), (std::vector<int32_t>{0, 1, 4, 5}));
}

class ExpertMatmulTest : public ::testing::TestWithParam<DType> {};

// Each pair's row equals the matmul of its x row with its expert's [N, K]
// slice; small integers keep every sum exact in fp32 whatever the order.
TEST_P(ExpertMatmulTest, EachPairIsItsExpertsMatmul) {
  const DType dtype = GetParam();
  constexpr int64_t kRows = 3, kPerRow = 2, kExperts = 4, kN = 5, kK = 16;
  std::vector<float> xv(kRows * kK), wv(kExperts * kN * kK);
  for (size_t i = 0; i < xv.size(); ++i) xv[i] = static_cast<float>(static_cast<int>(i * 7 % 9) - 4);
  for (size_t i = 0; i < wv.size(); ++i) wv[i] = static_cast<float>(static_cast<int>(i * 5 % 7) - 3) * 0.5f;
  const Tensor x = Tensor::FromFloats(xv, {kRows, kK}, dtype);
  const Tensor w = Tensor::FromFloats(wv, {kExperts, kN, kK}, dtype);
  const std::vector<int32_t> ids = {3, 0, 1, 3, 2, 0};
  const ExpertGroups g = Grouped(ids, kExperts);
  const Tensor out = Tensor::Zeros({kRows * kPerRow, kN}, dtype);
  ASSERT_TRUE(ExpertMatmul(x, w, g, out).ok());
  for (int64_t p = 0; p < kRows * kPerRow; ++p) {
    absl::StatusOr<Tensor> slice = w.Rows(ids[p], 1).Reshape({kN, kK});
    ASSERT_TRUE(slice.ok());
    const Tensor want = Tensor::Empty({1, kN}, dtype);
    ASSERT_TRUE(Matmul(x.Rows(p / kPerRow, 1), *slice, want).ok());
    EXPECT_EQ(Values(out.Rows(p, 1)), Values(want)) << "pair " << p;
  }
}

TEST_P(ExpertMatmulTest, PairsOfNoExpertAreLeftAlone) {
  const DType dtype = GetParam();
  const Tensor x = RandomTensor({2, 8}, dtype, 3);
  const Tensor w = RandomTensor({2, 4, 8}, dtype, 4);
  const ExpertGroups g = Grouped({1, -1}, 2);
  const Tensor out = Tensor::FromFloats(std::vector<float>(8, 2.5f), {2, 4}, dtype);
  ASSERT_TRUE(ExpertMatmul(x, w, g, out).ok());
  EXPECT_EQ(Values(out.Rows(1, 1)), std::vector<double>(4, 2.5));
}

INSTANTIATE_TEST_SUITE_P(Dtypes, ExpertMatmulTest, ::testing::Values(DType::kF32, DType::kBF16, DType::kF16),
                         DTypeParamName);

TEST(ExpertMatmul, RejectsBadShapes) {
  const Tensor x = Tensor::Zeros({3, 8}, DType::kF32);
  const Tensor w = Tensor::Zeros({2, 4, 8}, DType::kF32);
  const ExpertGroups g = Grouped({0, 1, 0, 1}, 2);  // 4 pairs do not spread over 3 rows
  absl::Status s = ExpertMatmul(x, w, g, Tensor::Zeros({4, 4}, DType::kF32));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("do not divide"), std::string::npos) << s;
  s = ExpertMatmul(x.Rows(0, 2), Tensor::Zeros({3, 4, 8}, DType::kF32), g, Tensor::Zeros({4, 4}, DType::kF32));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("w: expected dim 0 of size 2"), std::string::npos) << s;
  s = ExpertMatmul(x.Rows(0, 2), w, g, Tensor::Zeros({4, 4}, DType::kBF16));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("out: expected the dtype of x"), std::string::npos) << s;
}

TEST(GroupByExpert, RejectsTooManyPairs) {
  EXPECT_EQ(ExpertGroups::Empty(0, 4, Device::CPU()).status().code(), absl::StatusCode::kInvalidArgument);
  absl::StatusOr<ExpertGroups> g = ExpertGroups::Empty(8, kMaxExpertPairs + 1, Device::CPU());
  ASSERT_TRUE(g.ok());
  const absl::Status s = GroupByExpert(Tensor::Zeros({kMaxExpertPairs + 1}, DType::kI32), *g);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("at most 16777216 pairs"), std::string::npos) << s;
}

TEST(GatherPairs, RowsOfThePairsInGroupOrderAndBack) {
  // Pairs of a [3, 2] routing over 3 experts: expert 0 has pairs 1 and 4,
  // expert 1 pair 0, expert 2 pairs 2 and 5; pair 3 is in no group.
  const ExpertGroups g = Grouped({1, 0, 2, -1, 0, 2}, 3);
  const Tensor x = Tensor::FromFloats({10, 11, 20, 21, 30, 31}, {3, 2});
  const Tensor rows = Tensor::FromFloats(std::vector<float>(12, -1.0f), {6, 2});
  ASSERT_TRUE(GatherPairs(x, g, rows).ok());
  // Group order 1, 4 | 0 | 2, 5: x rows 0, 2 | 0 | 1, 2; the sixth place is unused.
  EXPECT_EQ(Values(rows), (std::vector<double>{10, 11, 30, 31, 10, 11, 20, 21, 30, 31, -1, -1}));
  const Tensor back = Tensor::FromFloats(std::vector<float>(12, -1.0f), {6, 2});
  ASSERT_TRUE(ScatterPairs(rows, g, back).ok());
  EXPECT_EQ(Values(back), (std::vector<double>{10, 11, 10, 11, 20, 21, -1, -1, 30, 31, 30, 31}));
}

TEST(GatherPairs, RejectsMismatchedShapes) {
  const ExpertGroups g = Grouped({0, 1, 0, 1}, 2);
  absl::Status s = GatherPairs(Tensor::Zeros({3, 2}, DType::kF32), g, Tensor::Zeros({4, 2}, DType::kF32));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("do not divide"), std::string::npos) << s;
  s = ScatterPairs(Tensor::Zeros({2, 2}, DType::kF32), g, Tensor::Zeros({4, 2}, DType::kF32));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("src: expected shape [4, 2]"), std::string::npos) << s;
}

// A long prefill's routes: more pairs than any decode step (131072: 16384
// tokens at top-8), grouped all the same.
TEST(GroupByExpert, ALongPrefillsRoutes) {
  std::vector<int32_t> ids(131072);
  for (size_t p = 0; p < ids.size(); ++p) ids[p] = static_cast<int32_t>(p * 7 % 128);
  const ExpertGroups g = Grouped(ids, 128);
  const std::vector<int32_t> offsets = Ints(g.offsets);
  EXPECT_EQ(offsets[128], 131072);
  EXPECT_EQ(offsets[1] - offsets[0], 1024);
  EXPECT_EQ(Ints(g.active)[0], 128);
}

// The fused pair against the ops it replaces, on the CPU: ExpertGateUpSilu
// is ExpertMatmul over the [gate | up] weight, then SiluAndMul, bit for bit
// (the same sums in the same order, the same roundings), written in group
// order; ExpertDown is ExpertMatmul of those rows, scattered back to pair
// order. A pair of no expert is left alone.
class FusedExpertsTest : public ::testing::TestWithParam<DType> {};

TEST_P(FusedExpertsTest, GateUpSiluThenDownEqualTheUnfusedOps) {
  const DType dtype = GetParam();
  constexpr int64_t kRows = 5, kPerRow = 2, kExperts = 4, kInter = 6, kHidden = 24;
  const std::vector<int32_t> ids = {3, 0, 1, 3, 2, 0, 3, -1, 0, 1};
  const ExpertGroups g = Grouped(ids, kExperts);
  const Tensor x = RandomTensor({kRows, kHidden}, dtype, 5);
  const Tensor gate_up = RandomTensor({kExperts, 2 * kInter, kHidden}, dtype, 6);
  const Tensor down = RandomTensor({kExperts, kHidden, kInter}, dtype, 7);
  const int64_t pairs = kRows * kPerRow, grouped = pairs - 1;

  const Tensor act = Tensor::FromFloats(std::vector<float>(pairs * kInter, 7.0f), {pairs, kInter}, dtype);
  ASSERT_TRUE(ExpertGateUpSilu(x, gate_up, g, act).ok());
  const Tensor gu = Tensor::Zeros({pairs, 2 * kInter}, dtype), want_act = Tensor::Zeros({pairs, kInter}, dtype);
  ASSERT_TRUE(ExpertMatmul(x, gate_up, g, gu).ok());
  ASSERT_TRUE(SiluAndMul(gu, want_act).ok());
  const std::vector<int32_t> order = Ints(g.order);
  for (int64_t i = 0; i < grouped; ++i) {
    EXPECT_EQ(Values(act.Rows(i, 1)), Values(want_act.Rows(order[i], 1))) << "group position " << i;
  }
  EXPECT_EQ(Values(act.Rows(grouped, 1)), std::vector<double>(kInter, 7.0)) << "the unused place was written";

  const Tensor out = Tensor::FromFloats(std::vector<float>(pairs * kHidden, 3.0f), {pairs, kHidden}, dtype);
  ASSERT_TRUE(ExpertDown(act, down, g, out).ok());
  const Tensor in_group = Tensor::Zeros({pairs, kHidden}, dtype), want = Tensor::Zeros({pairs, kHidden}, dtype);
  absl::StatusOr<ExpertGroups> one_per_pair = ExpertGroups::Empty(kExperts, pairs, Device::CPU());
  ASSERT_TRUE(one_per_pair.ok());
  std::vector<int32_t> group_ids(pairs, -1);  // act row i belongs to the expert of group position i
  for (int64_t i = 0; i < grouped; ++i) group_ids[i] = ids[order[i]];
  ASSERT_TRUE(GroupByExpert(Tensor::FromInts(group_ids, {pairs}), *one_per_pair).ok());
  ASSERT_TRUE(ExpertMatmul(act, down, *one_per_pair, in_group).ok());
  for (int64_t i = 0; i < grouped; ++i) {
    EXPECT_EQ(Values(out.Rows(order[i], 1)), Values(in_group.Rows(i, 1))) << "pair " << order[i];
  }
  EXPECT_EQ(Values(out.Rows(7, 1)), std::vector<double>(kHidden, 3.0)) << "the pair of no expert was written";
}

INSTANTIATE_TEST_SUITE_P(Dtypes, FusedExpertsTest, ::testing::Values(DType::kF32, DType::kBF16, DType::kF16),
                         DTypeParamName);

TEST(FusedExperts, RejectBadShapes) {
  const ExpertGroups g = Grouped({0, 1, 0, 1}, 2);
  const Tensor x = Tensor::Zeros({2, 8}, DType::kF32);
  absl::Status s = ExpertGateUpSilu(x, Tensor::Zeros({2, 5, 8}, DType::kF32), g, Tensor::Zeros({4, 2}, DType::kF32));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("w: expected [E, 2I, K]"), std::string::npos) << s;
  s = ExpertGateUpSilu(x, Tensor::Zeros({2, 6, 8}, DType::kF32), g, Tensor::Zeros({4, 6}, DType::kF32));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("act: expected shape [4, 3]"), std::string::npos) << s;
  s = ExpertDown(Tensor::Zeros({2, 3}, DType::kF32), Tensor::Zeros({2, 8, 3}, DType::kF32), g,
                 Tensor::Zeros({4, 8}, DType::kF32));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("act: expected dim 0 of size 4"), std::string::npos) << s;
  s = ExpertDown(Tensor::Zeros({4, 3}, DType::kF32), Tensor::Zeros({2, 8, 3}, DType::kBF16), g,
                 Tensor::Zeros({4, 8}, DType::kF32));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("w: expected the dtype of act"), std::string::npos) << s;
}

TEST(ChooseExpertKernel, GemvForDecodeAndF32TensorCoresAbove) {
  EXPECT_EQ(ChooseExpertKernel(ExpertKernel::kAuto, DType::kBF16, 8), ExpertKernel::kGemv);
  EXPECT_EQ(ChooseExpertKernel(ExpertKernel::kAuto, DType::kBF16, kTensorCorePairs), ExpertKernel::kGemv);
  EXPECT_EQ(ChooseExpertKernel(ExpertKernel::kAuto, DType::kBF16, kTensorCorePairs + 1), ExpertKernel::kTensorCore);
  EXPECT_EQ(ChooseExpertKernel(ExpertKernel::kAuto, DType::kF32, 1 << 20), ExpertKernel::kGemv);
  EXPECT_EQ(ChooseExpertKernel(ExpertKernel::kTensorCore, DType::kBF16, 1), ExpertKernel::kTensorCore);
  EXPECT_TRUE(ExpertKernelTakes(ExpertKernel::kTensorCore, DType::kF16, 768));
  EXPECT_FALSE(ExpertKernelTakes(ExpertKernel::kTensorCore, DType::kF32, 768));
  EXPECT_FALSE(ExpertKernelTakes(ExpertKernel::kTensorCore, DType::kBF16, 12));
  EXPECT_TRUE(ExpertKernelTakes(ExpertKernel::kGemv, DType::kF32, 12));
}

TEST(ExpertMatmulTakes, SixteenByteRows) {
  EXPECT_TRUE(ExpertMatmulTakes(DType::kBF16, 2048));
  EXPECT_TRUE(ExpertMatmulTakes(DType::kF32, 4));
  EXPECT_FALSE(ExpertMatmulTakes(DType::kBF16, 12));
  EXPECT_FALSE(ExpertMatmulTakes(DType::kI32, 16));
}

TEST(MoeFinalize, SumsEachRowsWeightedExpertsInOrder) {
  // Row 0: 0.5·[1, 2] + 0.25·[4, -8]; row 1: 1·[3, 3] + 0·[9, 9].
  const Tensor y = Tensor::FromFloats({1, 2, 4, -8, 3, 3, 9, 9}, {2, 2, 2});
  const Tensor scales = Tensor::FromFloats({0.5f, 0.25f, 1.0f, 0.0f}, {2, 2});
  const Tensor out = Tensor::Empty({2, 2}, DType::kF32);
  ASSERT_TRUE(MoeFinalize(y, scales, out).ok());
  EXPECT_EQ(Values(out), (std::vector<double>{1.5, -1.0, 3.0, 3.0}));
}

// The finalize MoeFinalizeAddRmsNorm fuses: with a zero residual, its
// residual output is the fp32 finalize, bit for bit.
TEST(MoeFinalize, IsTheFusedFinalizeBitForBit) {
  const Tensor y = RandomTensor({3, 4, 32}, DType::kF32, 9);
  const Tensor scales = RandomTensor({3, 4}, DType::kF32, 10);
  const Tensor out = Tensor::Empty({3, 32}, DType::kF32);
  ASSERT_TRUE(MoeFinalize(y, scales, out).ok());
  const Tensor residual = Tensor::Zeros({3, 32}, DType::kF32);
  const Tensor normed = Tensor::Empty({3, 32}, DType::kF32);
  ASSERT_TRUE(MoeFinalizeAddRmsNorm(y, scales, residual, Tensor::FromFloats(std::vector<float>(32, 1.0f), {32}),
                                    1e-6f, normed)
                  .ok());
  EXPECT_EQ(Values(out), Values(residual));
}

}  // namespace
}  // namespace seam::kernels
