// Reads that move with the rows: a read's gathering reads (read this rank's
// attention-TP slice and gather the read onto the DP rows in one step, tried
// in order before read + gather), and reads that run after the gather (an FFN
// read after the attention-DP gather; a read of every row on a residual kept
// on slices). Grids bit for bit against one rank on the recording fake over
// layouts, variants, policies, stage patterns, row patterns and depths.
#include <atomic>
#include <tuple>

#include <gtest/gtest.h>

#include "declared_reads.h"
#include "grid_case.h"
#include "rank_threads.h"
#include "seam/comm/recording_communicator.h"
#include "seam/core/status.h"
#include "stage_fixture.h"

namespace seam::boundary::testing {
namespace {

std::atomic<int> gathering_cases{0}, after_dp_cases{0};
class CountReporter : public ::testing::Environment {
 public:
  void TearDown() override {
    std::printf("gathering_reads grid: %d cases ran (%d reads gathered by a candidate, %d declined first); "
                "reads after the DP gather grid: %d cases ran\n",
                gathering_cases.load(), GatheringReadCounters().gathered.load(),
                GatheringReadCounters().declined.load(), after_dp_cases.load());
  }
};
const auto* const reporter = ::testing::AddGlobalTestEnvironment(new CountReporter);

using Param = std::tuple<std::pair<int, int>, BatchVariant, ReductionPolicy, std::string>;

void RunGrid(const Param& p, bool gathering, std::atomic<int>* counter) {
  const auto& [layout, variant, policy, pattern] = p;
  for (const std::vector<int64_t>& dp_rows : GridRowPatterns(layout.first)) {
    for (int layers : {1, 2}) {
      GridCase c{layout.first, layout.second, variant, policy, dp_rows, layers};
      c.pattern = pattern;
      c.gathering_reads = gathering;
      c.ffn_reads_after_dp_gather = !gathering;
      auto registry = std::make_shared<comm::RecordingRegistry>(comm::CommOptions{absl::Seconds(20)});
      const absl::Status s = RunGridCase(c, comm::MakeRecordingGroupFactory(registry));
      ASSERT_TRUE(s.ok()) << c.ToString() << ": " << s;
      ASSERT_TRUE(registry->ExpectSameSequenceInEveryGroup().ok()) << c.ToString();
      ++*counter;
    }
  }
}

class GatheringReadsGrid : public ::testing::TestWithParam<Param> {};
TEST_P(GatheringReadsGrid, AReadThatGathersItsSliceEqualsSingleRankBitForBit) {
  const auto& [layout, variant, policy, pattern] = GetParam();
  if (variant == BatchVariant::kUnpadded && layout.first > 1) GTEST_SKIP() << "UNPADDED: no attention DP";
  const int before = GatheringReadCounters().gathered.load();
  RunGrid(GetParam(), true, &gathering_cases);
  // An input-scattered batch keeps the residual on slices: every attention and
  // the final read gather it, through the candidate.
  if (variant == BatchVariant::kInputScattered && layout.second > 1) {
    EXPECT_GT(GatheringReadCounters().gathered.load(), before);
  }
  EXPECT_GE(GatheringReadCounters().declined.load(), GatheringReadCounters().gathered.load());
}

class ReadAfterDpGatherGrid : public ::testing::TestWithParam<Param> {};
TEST_P(ReadAfterDpGatherGrid, AnFfnReadAfterTheDpGatherEqualsSingleRankBitForBit) {
  const auto& [layout, variant, policy, pattern] = GetParam();
  if (variant == BatchVariant::kUnpadded && layout.first > 1) GTEST_SKIP() << "UNPADDED: no attention DP";
  RunGrid(GetParam(), false, &after_dp_cases);
}

std::string Name(const ::testing::TestParamInfo<Param>& info) {
  const auto& [layout, variant, policy, pattern] = info.param;
  return GridName(layout, variant, policy) + "_" + pattern;
}

const auto kLayouts = ::testing::Values(std::make_pair(1, 1), std::make_pair(1, 2), std::make_pair(1, 4),
                                        std::make_pair(2, 1), std::make_pair(2, 2));
const auto kVariants =
    ::testing::Values(BatchVariant::kOrdinary, BatchVariant::kUnpadded, BatchVariant::kInputScattered);
const auto kPolicies = ::testing::Values(ReductionPolicy::kAr, ReductionPolicy::kRs, ReductionPolicy::kRsRsv);

// 5 layouts × 3 variants × 3 policies × 3 patterns (UNPADDED only without
// attention DP: 117 parameters) × 3 row patterns × 2 depths = 702 cases each.
INSTANTIATE_TEST_SUITE_P(Grid, GatheringReadsGrid,
                         ::testing::Combine(kLayouts, kVariants, kPolicies,
                                            ::testing::Values(std::string("AF"), std::string("MF"), std::string("AFF"))),
                         Name);
INSTANTIATE_TEST_SUITE_P(Grid, ReadAfterDpGatherGrid,
                         ::testing::Combine(kLayouts, kVariants, kPolicies,
                                            ::testing::Values(std::string("AF"), std::string("MF"), std::string("AE"))),
                         Name);

std::unique_ptr<SyntheticStack> Stack(const Topology& t, ReductionPolicy policy, bool gathering, bool after_dp) {
  StackConfig config{2, policy, 3, "AF"};
  config.gathering_reads = gathering;
  config.ffn_reads_after_dp_gather = after_dp;
  return *SyntheticStack::Build(config, t);
}

bool HasStep(const std::vector<EntryPath>& entries, StepOp op) {
  for (const EntryPath& e : entries) {
    for (const Step& s : e.steps) {
      if (s.op == op) return true;
    }
  }
  return false;
}

TEST(GatheringReads, ASliceReadThenGatherBecomesOneStepOnlyWhereTheReadOffersIt) {
  const Topology t = *Topology::Make(4, 1, 1);
  auto with = Stack(t, ReductionPolicy::kRs, true, false);
  auto without = Stack(t, ReductionPolicy::kRs, false, false);
  const auto& attn_with = with->layers()[1].stages[0].boundary->plan();
  const auto& attn_without = without->layers()[1].stages[0].boundary->plan();
  for (BatchVariant v : {BatchVariant::kOrdinary, BatchVariant::kInputScattered}) {
    EXPECT_TRUE(HasStep(attn_with.Find(v)->entries, StepOp::kReadGather)) << BatchVariantName(v);
    EXPECT_FALSE(HasStep(attn_without.Find(v)->entries, StepOp::kReadGather)) << BatchVariantName(v);
    EXPECT_FALSE(HasStep(attn_without.Find(v)->entries, StepOp::kUpdateReadGather)) << BatchVariantName(v);
    // The final read offers them too.
    const auto& last = with->layers()[1].stages[1].boundary->plan();
    EXPECT_TRUE(HasStep(last.Find(v)->final_read, StepOp::kReadGather)) << BatchVariantName(v);
  }
  // An FFN's input gathers over TP onto the FFN rows: never a gathering read.
  const auto& ffn = with->layers()[1].stages[1].boundary->plan();
  EXPECT_FALSE(HasStep(ffn.Find(BatchVariant::kInputScattered)->entries, StepOp::kReadGather));
  EXPECT_EQ(Step({StepOp::kReadGather, CommGroup::kAttnTp, RowForm::kAttnTpSlice, RowForm::kDpRows}).ToString(),
            "gathering_read(attn_tp: attn_tp_slice->dp_rows)");
}

TEST(GatheringReads, AnFfnReadAfterTheDpGatherUpdatesOnItsRowsThenReadsTheGatheredResidual) {
  const Topology t = *Topology::Make(4, 2, 1);
  auto after = Stack(t, ReductionPolicy::kAr, false, true);
  const VariantPaths& v = *after->layers()[0].stages[1].boundary->plan().Find(BatchVariant::kOrdinary);
  const EntryPath* e = v.FindEntry(IncomingForm{StreamState::kPending, RowForm::kDpRows, SumGroup::kAttnTp,
                                                RowForm::kDpRows});
  ASSERT_NE(e, nullptr);
  std::vector<std::string> steps;
  for (const Step& s : e->steps) steps.push_back(s.ToString());
  EXPECT_EQ(steps, (std::vector<std::string>{"all_reduce(attn_tp)", "apply_update",
                                             "gather_residual(attn_dp: dp_rows->ffn_rows)", "norm_gathered"}));
  // Without attention DP there is no DP gather: the read keeps its place.
  auto one_dp = Stack(*Topology::Make(2, 1, 0), ReductionPolicy::kAr, false, true);
  EXPECT_FALSE(HasStep(one_dp->layers()[0].stages[1].boundary->plan().Find(BatchVariant::kOrdinary)->entries,
                       StepOp::kReadGathered));
}

TEST(GatheringReads, ACandidateThatDeclinesLeavesTheReadAndGatherToTheNextOne) {
  GatheringReadCounters().declined = 0;
  GatheringReadCounters().gathered = 0;
  GridCase c{1, 2, BatchVariant::kInputScattered, ReductionPolicy::kAr, {5}, 1};
  c.gathering_reads = true;
  auto registry = std::make_shared<comm::RecordingRegistry>(comm::CommOptions{absl::Seconds(20)});
  ASSERT_TRUE(RunGridCase(c, comm::MakeRecordingGroupFactory(registry)).ok());
  // Two ranks, each: the attention's input and the final read, each trying the
  // declining candidate first.
  EXPECT_EQ(GatheringReadCounters().gathered.load(), 4);
  EXPECT_EQ(GatheringReadCounters().declined.load(), 4);
}

}  // namespace
}  // namespace seam::boundary::testing
