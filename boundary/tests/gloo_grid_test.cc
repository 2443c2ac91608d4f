// A representative part of the exact grid on real Gloo over TCP loopback:
// every rank is a thread with its own Gloo groups found through a FileStore
// in a fresh directory, and must match the single-rank run bit for bit.
#include <tuple>

#include <gtest/gtest.h>

#include "grid_case.h"
#include "seam/comm/gloo_communicator.h"
#include "seam/comm/store.h"
#include "seam/core/status.h"
#include "seam/testing/temp_dir.h"

namespace seam::boundary::testing {
namespace {

using GlooParam = std::tuple<std::pair<int, int>, BatchVariant, ReductionPolicy>;

// Runs `c` once over real Gloo groups (a file store of its own).
absl::Status RunCaseOnGloo(const GridCase& c) {
  seam::testing::TempDir dir("seam_gloo_grid");
  SEAM_ASSIGN_OR_RETURN(auto store, comm::MakeFileStore(dir.path()));
  return RunGridCase(c, comm::MakeGlooGroupFactory(store, comm::CommOptions{absl::Seconds(20)}));
}

// Runs `c` over real Gloo groups on both non-equal row patterns of its layout.
void RunOnGloo(GridCase c) {
  const std::vector<std::vector<int64_t>> patterns = GridRowPatterns(c.dp);
  for (const std::vector<int64_t>& dp_rows : {patterns[1], patterns[2]}) {
    c.dp_rows = dp_rows;
    const absl::Status result = RunCaseOnGloo(c);
    ASSERT_TRUE(result.ok()) << c.ToString() << ": " << result;
  }
}

class GlooGrid : public ::testing::TestWithParam<GlooParam> {};

TEST_P(GlooGrid, TwoLayerStackOverGlooEqualsSingleRankBitForBit) {
  const auto [layout, variant, policy] = GetParam();
  if (variant == BatchVariant::kUnpadded && layout.first > 1) GTEST_SKIP() << "UNPADDED is served without attention DP only";
  const auto [dp, attn_tp] = layout;
  RunOnGloo(GridCase{dp, attn_tp, variant, policy, {}, 2});  // ragged rows, then one group empty
}

// Context-parallel batches (cp 2 × attention TP 1 and 2, ar and rs+rsv):
// three sequences, attentions mixing each sequence's earlier rows.
TEST(GlooFeatureGrid, ContextParallelOverGlooEqualsSingleRankBitForBit) {
  for (auto [cp, attn_tp] : {std::make_pair(2, 1), std::make_pair(2, 2)}) {
    for (ReductionPolicy policy : {ReductionPolicy::kAr, ReductionPolicy::kRsRsv}) {
      GridCase c{1, attn_tp, BatchVariant::kContextParallel, policy, {14}, 2};
      c.cp = cp;
      c.sequences = {5, 1, 8};
      c.causal_mix = true;
      const absl::Status result = RunCaseOnGloo(c);
      ASSERT_TRUE(result.ok()) << c.ToString() << ": " << result;
    }
  }
}

TEST(GlooFeatureGrid, MhcStreamsOverGlooEqualSingleRankBitForBit) {
  for (auto [dp, attn_tp, variant, policy] :
       {std::make_tuple(2, 2, BatchVariant::kOrdinary, ReductionPolicy::kRsRsv),
        std::make_tuple(1, 2, BatchVariant::kInputScattered, ReductionPolicy::kAr),
        std::make_tuple(2, 2, BatchVariant::kSequenceParallel, ReductionPolicy::kAr),
        std::make_tuple(1, 2, BatchVariant::kOrdinary, ReductionPolicy::kRs)}) {
    GridCase c{dp, attn_tp, variant, policy, {}, 2};
    c.pattern = "MF";
    c.mhc_streams = 3;
    RunOnGloo(c);
  }
}

TEST(GlooFeatureGrid, CapturesOverGlooEqualTheReferenceRowsBitForBit) {
  for (auto [dp, attn_tp, variant, policy] :
       {std::make_tuple(2, 2, BatchVariant::kOrdinary, ReductionPolicy::kRsRsv),
        std::make_tuple(1, 2, BatchVariant::kInputScattered, ReductionPolicy::kAr)}) {
    GridCase c{dp, attn_tp, variant, policy, {}, 2};
    c.capture = true;
    RunOnGloo(c);
  }
}

TEST(GlooFeatureGrid, LongCatLikeBranchOverGlooEqualsSingleRankBitForBit) {
  for (auto [dp, attn_tp, variant, policy] :
       {std::make_tuple(2, 2, BatchVariant::kOrdinary, ReductionPolicy::kRsRsv),
        std::make_tuple(1, 2, BatchVariant::kUnpadded, ReductionPolicy::kAr)}) {
    GridCase c{dp, attn_tp, variant, policy, {}, 2};
    c.pattern = "AB";
    RunOnGloo(c);
  }
}

// 3 layouts × 2 row patterns = 6 cases.
TEST(GlooFeatureGrid, GatheringReadsOverGlooEqualSingleRankBitForBit) {
  for (auto [dp, attn_tp, variant, policy] :
       {std::make_tuple(2, 2, BatchVariant::kOrdinary, ReductionPolicy::kRsRsv),
        std::make_tuple(1, 2, BatchVariant::kInputScattered, ReductionPolicy::kAr),
        std::make_tuple(1, 4, BatchVariant::kOrdinary, ReductionPolicy::kRs)}) {
    GridCase c{dp, attn_tp, variant, policy, {}, 2};
    c.gathering_reads = true;
    RunOnGloo(c);
  }
}

// FFN reads after the DP gather (2 layouts), and reads of every row on an
// input-scattered or sequence-parallel batch (2 layouts each), × 2 row
// patterns = 12 cases.
TEST(GlooFeatureGrid, ReadsAfterTheGatherOverGlooEqualSingleRankBitForBit) {
  for (auto [dp, attn_tp, variant, policy] :
       {std::make_tuple(2, 2, BatchVariant::kOrdinary, ReductionPolicy::kRsRsv),
        std::make_tuple(2, 1, BatchVariant::kInputScattered, ReductionPolicy::kAr)}) {
    GridCase c{dp, attn_tp, variant, policy, {}, 2};
    c.ffn_reads_after_dp_gather = true;
    RunOnGloo(c);
  }
  for (auto [dp, attn_tp] : {std::make_pair(1, 2), std::make_pair(2, 2)}) {
    for (BatchVariant variant : {BatchVariant::kInputScattered, BatchVariant::kSequenceParallel}) {
      GridCase c{dp, attn_tp, variant, ReductionPolicy::kAr, {}, 2};
      c.reads_all_rows = true;
      RunOnGloo(c);
    }
  }
}

std::string Name(const ::testing::TestParamInfo<GlooParam>& info) {
  const auto [layout, variant, policy] = info.param;
  return GridName(layout, variant, policy);
}

INSTANTIATE_TEST_SUITE_P(
    Loopback, GlooGrid,
    ::testing::Combine(::testing::Values(std::make_pair(1, 2), std::make_pair(2, 1), std::make_pair(2, 2)),
                       ::testing::Values(BatchVariant::kOrdinary, BatchVariant::kUnpadded,
                                         BatchVariant::kInputScattered, BatchVariant::kSequenceParallel),
                       ::testing::Values(ReductionPolicy::kAr, ReductionPolicy::kRsRsv)),
    Name);

}  // namespace
}  // namespace seam::boundary::testing
