// The exact-arithmetic grid: a synthetic stack of 1–4 layers, run on every
// supported (attention DP, attention TP) layout, row pattern, reduction
// policy and batch variant over the recording fake, must equal the
// single-rank run bit for bit, and every rank of every group must issue the
// same collective sequence. A sequence-parallel batch issues no all-reduce.
#include <atomic>
#include <tuple>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "grid_case.h"
#include "seam/comm/recording_communicator.h"

namespace seam::boundary::testing {
namespace {

std::atomic<int> cases_run{0};

class GridCountReporter : public ::testing::Environment {
 public:
  void TearDown() override { std::printf("exact grid: %d cases ran\n", cases_run.load()); }
};
const auto* const reporter = ::testing::AddGlobalTestEnvironment(new GridCountReporter);

using GridParam = std::tuple<std::pair<int, int>, BatchVariant, ReductionPolicy>;

class ExactGrid : public ::testing::TestWithParam<GridParam> {};

TEST_P(ExactGrid, DistributedStackEqualsSingleRankBitForBit) {
  const auto [layout, variant, policy] = GetParam();
  const auto [dp, attn_tp] = layout;
  for (const std::vector<int64_t>& dp_rows : GridRowPatterns(dp)) {
    for (int layers = 1; layers <= 4; ++layers) {
      const GridCase c{dp, attn_tp, variant, policy, dp_rows, layers};
      auto registry = std::make_shared<comm::RecordingRegistry>(comm::CommOptions{absl::Seconds(20)});
      const absl::Status result = RunGridCase(c, comm::MakeRecordingGroupFactory(registry));
      // UNPADDED and CONTEXT_PARALLEL are served without attention DP only.
      if ((variant == BatchVariant::kUnpadded || variant == BatchVariant::kContextParallel) && dp > 1) {
        ASSERT_EQ(result.code(), absl::StatusCode::kUnimplemented) << c.ToString() << ": " << result;
        ASSERT_THAT(std::string(result.message()),
                    ::testing::HasSubstr(std::string("no stage boundary path for the active ") +
                                         BatchVariantName(variant) + " batch"));
        ++cases_run;
        continue;
      }
      ASSERT_TRUE(result.ok()) << c.ToString() << ": " << result;
      ASSERT_TRUE(registry->ExpectSameSequenceInEveryGroup().ok()) << registry->ExpectSameSequenceInEveryGroup();
      if (variant == BatchVariant::kSequenceParallel) {
        // Every sum of a sequence-parallel batch completes by a reduce-scatter.
        ASSERT_EQ(CountCollectives(*registry, comm::CollectiveKind::kAllReduce), 0) << c.ToString();
        if (attn_tp * dp > 1) {
          ASSERT_GT(ReduceScatters(*registry), 0) << c.ToString();
        }
      }
      ++cases_run;
    }
  }
}

std::string Name(const ::testing::TestParamInfo<GridParam>& info) {
  const auto [layout, variant, policy] = info.param;
  return GridName(layout, variant, policy);
}

INSTANTIATE_TEST_SUITE_P(
    Grid, ExactGrid,
    ::testing::Combine(::testing::Values(std::make_pair(1, 1), std::make_pair(1, 2), std::make_pair(1, 4),
                                         std::make_pair(2, 1), std::make_pair(2, 2), std::make_pair(4, 1)),
                       ::testing::Values(BatchVariant::kOrdinary, BatchVariant::kUnpadded,
                                         BatchVariant::kInputScattered, BatchVariant::kSequenceParallel,
                                         BatchVariant::kContextParallel),
                       ::testing::Values(ReductionPolicy::kAr, ReductionPolicy::kRs, ReductionPolicy::kRsv,
                                         ReductionPolicy::kRsRsv, ReductionPolicy::kAuto)),
    Name);

}  // namespace
}  // namespace seam::boundary::testing
