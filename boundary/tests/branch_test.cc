// Prepared branches: a LongCat-like layer (attention, then a MoE whose
// prepared input also feeds a dense FFN → attention → dense FFN branch that
// is merged back) on every layout, bit for bit against one rank; and the
// construction rules and errors of branches.
#include <atomic>
#include <cmath>
#include <tuple>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "grid_case.h"
#include "seam/boundary/boundary_errors.h"
#include "seam/boundary/branch.h"
#include "seam/boundary/plan_printer.h"
#include "seam/comm/recording_communicator.h"
#include "seam/core/status.h"
#include "stage_fixture.h"

namespace seam::boundary::testing {
namespace {

using ::testing::HasSubstr;

std::atomic<int> grid_cases{0};
class CountReporter : public ::testing::Environment {
 public:
  void TearDown() override { std::printf("branch (LongCat-like) grid: %d cases ran\n", grid_cases.load()); }
};
const auto* const reporter = ::testing::AddGlobalTestEnvironment(new CountReporter);

using Param = std::tuple<std::pair<int, int>, BatchVariant, ReductionPolicy, std::string>;
class BranchGrid : public ::testing::TestWithParam<Param> {};

TEST_P(BranchGrid, LongCatLikeLayerEqualsSingleRankBitForBit) {
  const auto& [layout, variant, policy, pattern] = GetParam();
  if (variant == BatchVariant::kUnpadded && layout.first > 1) GTEST_SKIP() << "UNPADDED: no attention DP";
  for (const std::vector<int64_t>& dp_rows : GridRowPatterns(layout.first)) {
    for (int layers : {1, 2}) {
      GridCase c{layout.first, layout.second, variant, policy, dp_rows, layers};
      c.pattern = pattern;
      auto registry = std::make_shared<comm::RecordingRegistry>(comm::CommOptions{absl::Seconds(20)});
      const absl::Status s = RunGridCase(c, comm::MakeRecordingGroupFactory(registry));
      ASSERT_TRUE(s.ok()) << c.ToString() << ": " << s;
      const absl::Status same = registry->ExpectSameSequenceInEveryGroup();
      ASSERT_TRUE(same.ok()) << c.ToString() << ": " << same;
      ++grid_cases;
    }
  }
}

std::string Name(const ::testing::TestParamInfo<Param>& info) {
  const auto& [layout, variant, policy, pattern] = info.param;
  return GridName(layout, variant, policy) + "_" + pattern;
}

INSTANTIATE_TEST_SUITE_P(
    Grid, BranchGrid,
    ::testing::Combine(::testing::Values(std::make_pair(1, 1), std::make_pair(1, 2), std::make_pair(1, 4),
                                         std::make_pair(2, 1), std::make_pair(2, 2)),
                       ::testing::Values(BatchVariant::kOrdinary, BatchVariant::kUnpadded),
                       ::testing::Values(ReductionPolicy::kAr, ReductionPolicy::kRs, ReductionPolicy::kRsRsv),
                       ::testing::Values(std::string("AB"), std::string("MB"), std::string("ABF"))),
    Name);

// ---- Construction and errors. ----
struct Built {
  NormParams norm = UnitNorm();
  std::unique_ptr<LayerStack> stack;
  std::vector<std::shared_ptr<StageBoundary>> main, branch;
};

std::unique_ptr<Built> BuildLongCat(const Topology& t, BranchOptions options = {}, bool source_merges = true,
                                    absl::Status* error = nullptr) {
  auto b = std::make_unique<Built>();
  b->stack = std::make_unique<LayerStack>(LayerStackOptions{t, ReductionPolicy::kAr});
  b->main = *SEAM_APPEND_STAGES(0, StageItem{DeclareAttn(), &b->norm},
                                StageItem{DeclareFfn({true, false, source_merges}), &b->norm});
  auto branch = AppendBranchAt(__FILE__, __LINE__, 0, *b->main[1],
                               {StageItem{DeclareFfn(), &b->norm}, StageItem{DeclareAttn(), &b->norm},
                                StageItem{DeclareFfn(), &b->norm}},
                               options);
  if (error != nullptr) *error = branch.status();
  if (branch.ok()) b->branch = *branch;
  return b;
}

TEST(Branch, ABranchNeitherExtendsTheStackNorWaitsForAConsumer) {
  auto b = BuildLongCat(*Topology::Make(1, 1, 0));
  ASSERT_EQ(b->branch.size(), 3u);
  for (const auto& s : b->branch) EXPECT_TRUE(s->bound());  // bound at once
  EXPECT_FALSE(b->main[1]->bound());                         // the source still waits for its consumer
  EXPECT_EQ(b->stack->stage_count(), 2);
  auto next = SEAM_APPEND_STAGES(1, StageItem{DeclareAttn(), &b->norm});
  ASSERT_TRUE(next.ok()) << next.status();
  ASSERT_TRUE(b->stack->Close().ok());
  // The next append follows the source, not the branch.
  EXPECT_TRUE((*next)[0]->plan().producer.declaration.merges_branch);
  EXPECT_TRUE(b->branch[0]->declaration().place.prepared_entry);
  EXPECT_FALSE(b->branch[1]->declaration().place.prepared_entry);
}

TEST(Branch, ThePlanPrintsBranchesCapturesAndTheFinalNormsHandoff) {
  auto b = BuildLongCat(*Topology::Make(2, 1, 0));
  ASSERT_TRUE(b->stack->Close().ok());
  std::vector<const StagePlan*> plans;
  for (const auto& s : b->main) plans.push_back(&s->plan());
  for (const auto& s : b->branch) plans.push_back(&s->plan());
  const std::string text = PlanToText(plans);
  EXPECT_THAT(text, HasSubstr("ffn(sparse, merges a branch, EXIT_SCOPED)"));
  EXPECT_THAT(text, HasSubstr("branch: first stage, entered through branch_input (its norm never applied)"));
  EXPECT_THAT(text, HasSubstr("branch: inside a prepared branch"));
  EXPECT_THAT(text, HasSubstr("capture: the updated residual on dp_rows (borrowed, sum completed unfused)"));
  EXPECT_THAT(text, HasSubstr("final norm: takes a deferred MoE finalize"));
  EXPECT_THAT(PlanToJson(plans), HasSubstr("\"prepared_entry\": true"));
}

TEST(Branch, APreparedBranchMustEnterThroughBranchInput) {
  auto b = BuildLongCat(*Topology::Make(1, 1, 0));
  ASSERT_TRUE(b->stack->Close().ok());
  SelfComms self;
  ForwardBatch batch(1, BatchVariant::kOrdinary, *Topology::Make(1, 1, 0), {3});
  batch.comms = self.comms();
  Hidden h = *Start(batch, Rows(1, 3));
  auto refused = b->branch[0]->Prepare(h, batch);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(refused.status().message(), "a prepared branch must enter through branch_input, not prepare");
  EXPECT_EQ(refused.status(), errors::PreparedBranchEnteredThroughPrepare());
}

TEST(Branch, ConstructionRefusesTheVariantsBranchesDoNotServe) {
  for (BatchVariant v : {BatchVariant::kInputScattered, BatchVariant::kContextParallel,
                         BatchVariant::kSequenceParallel}) {
    absl::Status error;
    BuildLongCat(*Topology::Make(1, 1, 0), BranchOptions{{BatchVariant::kOrdinary, v}}, true, &error);
    EXPECT_EQ(error.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(error.message(), absl::StrCat("branch transport supports ordinary token rows only; a branch cannot serve ",
                                            BatchVariantName(v), " batches"));
  }
}

TEST(Branch, ASourceNotDeclaredToMergeABranchIsRefused) {
  absl::Status error;
  BuildLongCat(*Topology::Make(1, 1, 0), {}, /*source_merges=*/false, &error);
  EXPECT_EQ(error.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(error.message()), HasSubstr("must be declared with merges_branch"));
}

TEST(Branch, AnInputScatteredBatchHasNoBranchPath) {
  auto b = BuildLongCat(*Topology::Make(1, 1, 0));
  ASSERT_TRUE(b->stack->Close().ok());
  SelfComms self;
  ForwardBatch batch(1, BatchVariant::kInputScattered, *Topology::Make(1, 1, 0), {3});
  batch.comms = self.comms();
  Hidden h = *Start(batch, Rows(1, 3));
  Tensor x = *b->main[0]->Prepare(h, batch);
  h = *b->main[0]->Finish(x, batch);
  x = *b->main[1]->Prepare(h, batch);
  auto fork = BranchInput(*b->branch[0], x, batch);
  EXPECT_EQ(fork.status(), errors::NoPathForVariant("INPUT_SCATTERED"));
  EXPECT_EQ(fork.status().message(), "no stage boundary path for the active INPUT_SCATTERED batch");
}

TEST(Branch, TheFirstBranchStagesNormIsNeverApplied) {
  const Topology t = *Topology::Make(1, 1, 0);
  NormParams poisoned = UnitNorm();
  std::vector<float> nan(kHidden, std::nanf(""));
  poisoned.weight = Tensor::FromFloats(nan, {kHidden});
  NormParams norm = UnitNorm();
  LayerStack stack(LayerStackOptions{t, ReductionPolicy::kAr});
  auto main = *SEAM_APPEND_STAGES(0, StageItem{DeclareAttn(), &norm}, StageItem{DeclareFfn({true, false, true}), &norm});
  auto branch = *SEAM_APPEND_BRANCH(0, *main[1], StageItem{DeclareFfn(), &poisoned}, StageItem{DeclareAttn(), &norm});
  ASSERT_TRUE(stack.Close().ok());
  SelfComms self;
  ForwardBatch batch(1, BatchVariant::kOrdinary, t, {3});
  batch.comms = self.comms();
  Hidden h = *Start(batch, Rows(1, 3));
  Tensor x = *main[0]->Prepare(h, batch);
  h = *main[0]->Finish(PartialOutput(x, 1), batch);
  x = *main[1]->Prepare(h, batch);
  auto fork = BranchInput(*branch[0], x, batch);
  ASSERT_TRUE(fork.ok()) << fork.status();
  EXPECT_TRUE(BitEqual(fork->input, x));  // moved, not normed again
  Hidden bh = *branch[0]->Finish(PartialOutput(fork->input, 1), fork->batch);
  Tensor bx = *branch[1]->Prepare(bh, fork->batch);
  bh = *branch[1]->Finish(PartialOutput(bx, 1), fork->batch);
  auto merged_in = BranchOutput(bh, fork->batch);
  ASSERT_TRUE(merged_in.ok()) << merged_in.status();
  h = *main[1]->Finish(PartialOutput(x, 1), batch);
  auto merged = MergeBranch(h, batch, *merged_in);
  ASSERT_TRUE(merged.ok()) << merged.status();
  auto out = FinalNorm(*merged, batch, norm);
  ASSERT_TRUE(out.ok()) << out.status();
  for (float v : out->ToFloats()) ASSERT_FALSE(std::isnan(v));
}

}  // namespace
}  // namespace seam::boundary::testing
