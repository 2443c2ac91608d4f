// Contracts of the design that the library once bent, each on the exact grid
// (bitwise against one rank, same collective sequence on every rank):
// a mixer that does not gather its attention-TP input, an always-partial
// attention at the end of the stack leaving its sum to the final norm, an
// FFN whose compute completes its own sum, the operation-scheduled exit,
// the reduce-scatterv refused at batch time, and UNPADDED keeping the FFN on
// the attention's rows. Plus the single-rank contracts around them.
#include <atomic>
#include <tuple>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "grid_case.h"
#include "rank_threads.h"
#include "seam/boundary/boundary_errors.h"
#include "seam/comm/recording_communicator.h"
#include "seam/core/status.h"
#include "stage_fixture.h"

namespace seam::boundary::testing {
namespace {

using ::testing::HasSubstr;

std::atomic<int> cases_run{0};
class CountReporter : public ::testing::Environment {
 public:
  void TearDown() override { std::printf("bent-contract grids: %d cases ran\n", cases_run.load()); }
};
const auto* const reporter = ::testing::AddGlobalTestEnvironment(new CountReporter);

// Runs `c` on the recording fake; returns the registry for log checks.
std::shared_ptr<comm::RecordingRegistry> RunOnFake(const GridCase& c) {
  auto registry = std::make_shared<comm::RecordingRegistry>(comm::CommOptions{absl::Seconds(20)});
  const absl::Status s = RunGridCase(c, comm::MakeRecordingGroupFactory(registry));
  EXPECT_TRUE(s.ok()) << c.ToString() << ": " << s;
  const absl::Status same = registry->ExpectSameSequenceInEveryGroup();
  EXPECT_TRUE(same.ok()) << c.ToString() << ": " << same;
  ++cases_run;
  return registry;
}

using Param = std::tuple<std::pair<int, int>, BatchVariant, ReductionPolicy, std::string>;
class BentContractGrid : public ::testing::TestWithParam<Param> {};

// Patterns: "NF"/"N"/"NFN" non-gathering mixers on slices; "FA" a terminal
// always-partial attention; "AC" an output-complete FFN; "AT" CompleteNow.
TEST_P(BentContractGrid, StackEqualsSingleRankBitForBit) {
  const auto& [layout, variant, policy, pattern] = GetParam();
  if (variant == BatchVariant::kUnpadded && layout.first > 1) GTEST_SKIP() << "UNPADDED: no attention DP";
  for (const std::vector<int64_t>& dp_rows : GridRowPatterns(layout.first)) {
    for (int layers : {1, 3}) {
      GridCase c{layout.first, layout.second, variant, policy, dp_rows, layers};
      c.pattern = pattern;
      RunOnFake(c);
    }
  }
}

std::string Name(const ::testing::TestParamInfo<Param>& info) {
  const auto& [layout, variant, policy, pattern] = info.param;
  return GridName(layout, variant, policy) + "_" + pattern;
}

INSTANTIATE_TEST_SUITE_P(
    Contracts, BentContractGrid,
    ::testing::Combine(::testing::Values(std::make_pair(1, 1), std::make_pair(1, 2), std::make_pair(1, 4),
                                         std::make_pair(2, 1), std::make_pair(2, 2)),
                       ::testing::Values(BatchVariant::kOrdinary, BatchVariant::kUnpadded,
                                         BatchVariant::kInputScattered, BatchVariant::kSequenceParallel),
                       ::testing::Values(ReductionPolicy::kAr, ReductionPolicy::kRsRsv),
                       ::testing::Values(std::string("NF"), std::string("N"), std::string("NFN"),
                                         std::string("FA"), std::string("AC"), std::string("AT"))),
    Name);

// Whether any rank of any group of `c`'s topology issued a collective of `kind`.
bool LogHas(comm::RecordingRegistry& registry, const GridCase& c, comm::CollectiveKind kind) {
  for (const std::string& name : registry.GroupNames()) {
    const int size = name == "tp" ? c.dp * c.attn_tp : name.rfind("attn_tp", 0) == 0 ? c.attn_tp : c.dp;
    for (const auto& log : registry.World(name, size)->Logs()) {
      for (const comm::CollectiveRecord& r : log) {
        if (r.kind == kind) return true;
      }
    }
  }
  return false;
}

TEST(BentContracts, RsvRefusedAtBatchTimeFallsBackBitForBit) {
  for (const auto layout : {std::make_pair(2, 1), std::make_pair(2, 2), std::make_pair(4, 1)}) {
    for (const std::vector<int64_t>& dp_rows : GridRowPatterns(layout.first)) {
      GridCase c{layout.first, layout.second, BatchVariant::kOrdinary, ReductionPolicy::kRsv, dp_rows, 3};
      auto usable = RunOnFake(c);
      EXPECT_TRUE(LogHas(*usable, c, comm::CollectiveKind::kReduceScatterV)) << c.ToString();
      c.on_batch = [](ForwardBatch& b) { b.rsv_usable = false; };
      auto refused = RunOnFake(c);
      EXPECT_FALSE(LogHas(*refused, c, comm::CollectiveKind::kReduceScatterV)) << c.ToString();
    }
  }
}

TEST(BentContracts, UnpaddedKeepsTheFfnOnTheAttentionsRows) {
  for (int attn_tp : {2, 4}) {
    for (int64_t rows : {7, 5, 3}) {  // rows that do not divide over attention TP
      GridCase c{1, attn_tp, BatchVariant::kUnpadded, ReductionPolicy::kRsRsv, {rows}, 3};
      auto registry = RunOnFake(c);
      EXPECT_FALSE(LogHas(*registry, c, comm::CollectiveKind::kReduceScatterV)) << c.ToString();
      EXPECT_FALSE(LogHas(*registry, c, comm::CollectiveKind::kReduceScatter)) << c.ToString();
      EXPECT_FALSE(LogHas(*registry, c, comm::CollectiveKind::kAllGatherV)) << c.ToString();
    }
  }
  auto t = *Topology::Make(4, 2, 0);
  auto layer = BuildOneLayer(t);
  ASSERT_TRUE(layer.ok());
  EXPECT_EQ((*layer)->ffn->plan().Find(BatchVariant::kUnpadded), nullptr);
}

TEST(BentContracts, TerminalAlwaysPartialAttentionLeavesItsSumToTheFinalNorm) {
  auto t = *Topology::Make(2, 1, 0);
  LayerStack stack(LayerStackOptions{t, ReductionPolicy::kAr});
  NormParams norm = UnitNorm();
  auto b = SEAM_APPEND_STAGES(0, StageItem{DeclareFfn(), &norm}, StageItem{DeclareAttn(), &norm});
  ASSERT_TRUE(b.ok());
  ASSERT_TRUE(stack.Close().ok());
  const VariantPaths* vp = (*b)[1]->plan().Find(BatchVariant::kOrdinary);
  ASSERT_EQ(vp->exit.options.size(), 1u);
  EXPECT_EQ(vp->exit.options[0].choice, ExitChoice::kRegisterPartial);
  EXPECT_TRUE(vp->exit.options[0].steps.empty());
  const EntryPath* fin = vp->FindFinalRead(vp->exit.options[0].leaves);
  ASSERT_NE(fin, nullptr);
  EXPECT_EQ(fin->steps.front().op, StepOp::kFusedInput);
}

TEST(BentContracts, OutputCompleteFfnOwesNothingAtItsExit) {
  auto t = *Topology::Make(2, 1, 0);
  LayerStack stack(LayerStackOptions{t, ReductionPolicy::kRsRsv});
  NormParams norm = UnitNorm();
  auto b = SEAM_APPEND_STAGES(0, StageItem{DeclareAttn(), &norm}, StageItem{DeclarationOf('C'), &norm});
  ASSERT_TRUE(b.ok());
  ASSERT_TRUE(stack.Close().ok());
  for (const ExitOption& o : (*b)[1]->plan().Find(BatchVariant::kOrdinary)->exit.options) {
    EXPECT_EQ(o.leaves.owed, SumGroup::kNone);
    for (const Step& s : o.steps) EXPECT_FALSE(s.issues_collective()) << s.ToString();
  }
}

TEST(BentContracts, NonGatheringMixerIsHandedItsSlice) {
  auto t = *Topology::Make(2, 1, 1);
  LayerStack stack(LayerStackOptions{t, ReductionPolicy::kAr});
  NormParams norm = UnitNorm();
  auto b = SEAM_APPEND_STAGES(0, StageItem{DeclarationOf('N'), &norm}, StageItem{DeclareFfn(), &norm});
  ASSERT_TRUE(b.ok());
  ASSERT_TRUE(stack.Close().ok());
  SelfComms self;  // nothing below communicates: the mixer is refused before it computes
  ForwardBatch batch(1, BatchVariant::kInputScattered, t, {6});
  auto h = Start(batch, Rows(3, 3));
  ASSERT_TRUE(h.ok()) << h.status();
  auto x = (*b)[0]->Prepare(*h, batch);
  ASSERT_TRUE(x.ok()) << x.status();
  EXPECT_EQ(x->rows(), 3);  // its slice, not the DP rows
  // Output on the slice (compute that did not gather) is refused by name.
  auto bad = (*b)[0]->Finish(*x, batch);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("does not gather its attention-TP input"));
}

TEST(BentContracts, FinalNormSkipEmptySkipsOnlyTheNormKernel) {
  auto t = *Topology::Make(1, 1, 0);
  SelfComms self;
  NormParams wrong;  // a weight of the wrong width: the kernel refuses it
  wrong.weight = Tensor::FromFloats({1.0f, 1.0f}, {2});
  for (bool skip : {true, false}) {
    ForwardBatch batch(1, BatchVariant::kOrdinary, t, {0});
    batch.comms = self.comms();
    auto h = Start(batch, Rows(1, 0));
    ASSERT_TRUE(h.ok());
    auto out = FinalNorm(*h, batch, wrong, FinalNormOptions{skip});
    EXPECT_EQ(out.ok(), skip) << out.status();
    if (skip) EXPECT_EQ(out->rows(), 0);
  }
}

TEST(BentContracts, PipelinePieceWithoutStageFactsIsRefused) {
  auto t = *Topology::Make(1, 1, 0);
  NormParams norm = UnitNorm();
  LayerStackOptions options{t, ReductionPolicy::kAr};
  options.first_layer = 2;
  options.end_layer = 4;
  options.total_layers = 6;
  LayerStack stack(options);
  auto b = SEAM_APPEND_STAGES(2, StageItem{DeclareAttn(), &norm}, StageItem{DeclareFfn(), &norm});
  EXPECT_EQ(b.status(), errors::PipelinePieceWithoutStageFacts(2, 4, 6));
  EXPECT_THAT(std::string(b.status().message()), HasSubstr("needs stage_facts"));
  EXPECT_EQ(stack.Close(), errors::PipelinePieceWithoutStageFacts(2, 4, 6));
}

}  // namespace
}  // namespace seam::boundary::testing
