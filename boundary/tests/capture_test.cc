// Capture and auxiliary outputs: a capture is what the stage actually read,
// on the rows it names, borrowed unless its storage is the capture's alone.
// The grid checks every rank's captures against the single-rank run's rows
// bit for bit; the unit tests check each rule and error.
#include <atomic>
#include <tuple>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "grid_case.h"
#include "rank_threads.h"
#include "seam/boundary/boundary_errors.h"
#include "seam/comm/recording_communicator.h"
#include "seam/comm/self_communicator.h"
#include "seam/core/status.h"
#include "stage_fixture.h"

namespace seam::boundary::testing {
namespace {

using ::testing::HasSubstr;

std::atomic<int> grid_cases{0};
class CountReporter : public ::testing::Environment {
 public:
  void TearDown() override { std::printf("capture grid: %d cases ran\n", grid_cases.load()); }
};
const auto* const reporter = ::testing::AddGlobalTestEnvironment(new CountReporter);

using Param = std::tuple<std::pair<int, int>, BatchVariant, ReductionPolicy, std::string, int>;
class CaptureGrid : public ::testing::TestWithParam<Param> {};

TEST_P(CaptureGrid, CapturesAreWhatEachStageReadOnItsRowsBitForBit) {
  const auto& [layout, variant, policy, pattern, streams] = GetParam();
  if (variant == BatchVariant::kUnpadded && layout.first > 1) GTEST_SKIP() << "UNPADDED: no attention DP";
  for (const std::vector<int64_t>& dp_rows : GridRowPatterns(layout.first)) {
    int64_t total = 0;
    for (int64_t r : dp_rows) total += r;
    StackConfig config{2, policy, 9, pattern};
    config.capture = true;
    config.mhc_streams = streams;
    const Tensor all = StackInput(4, total);
    const Topology one = *Topology::Make(1, 1, 0);
    auto ref = *SyntheticStack::Build(config, one);
    auto self = comm::MakeSelfCommunicator("tp");
    ForwardBatch rb(1, BatchVariant::kOrdinary, one, {total});
    rb.comms = StageComms{self.get(), self.get(), self.get()};
    const Tensor expected = *ref->Forward(rb, all);
    auto registry = std::make_shared<comm::RecordingRegistry>(comm::CommOptions{absl::Seconds(20)});
    auto results = RunRanks(layout.first * layout.second, layout.first, comm::MakeRecordingGroupFactory(registry),
                            [&](const Topology& t, const StageComms& comms) -> absl::Status {
                              SEAM_ASSIGN_OR_RETURN(auto stack, SyntheticStack::Build(config, t));
                              ForwardBatch batch(1, variant, t, dp_rows);
                              batch.comms = comms;
                              SEAM_ASSIGN_OR_RETURN(Tensor out,
                                                    stack->Forward(batch, RankInput(all, batch.rows, variant)));
                              if (!BitEqual(out, RowsOfReference(expected, out, batch.rows))) {
                                return absl::InternalError("output differs");
                              }
                              SEAM_RETURN_IF_ERROR(SameCaptures(ref->captured(), stack->captured(), batch.rows, "prepare"));
                              SEAM_RETURN_IF_ERROR(SameCaptures(ref->gathered(), stack->gathered(), batch.rows, "gathered"));
                              SEAM_RETURN_IF_ERROR(
                                  SameCaptures(ref->final_captured(), stack->final_captured(), batch.rows, "final"));
                              if (stack->final_captured().owned() != 0 || stack->captured().owned() != 0) {
                                return absl::InternalError("a residual capture was passed as owned");
                              }
                              return absl::OkStatus();
                            });
    for (size_t r = 0; r < results.size(); ++r) ASSERT_TRUE(results[r].ok()) << "rank " << r << ": " << results[r];
    ASSERT_TRUE(registry->ExpectSameSequenceInEveryGroup().ok());
    ++grid_cases;
  }
}

std::string Name(const ::testing::TestParamInfo<Param>& info) {
  const auto& [layout, variant, policy, pattern, streams] = info.param;
  return GridName(layout, variant, policy) + "_" + pattern + "_n" + std::to_string(streams);
}

INSTANTIATE_TEST_SUITE_P(
    Grid, CaptureGrid,
    ::testing::Combine(::testing::Values(std::make_pair(1, 1), std::make_pair(1, 2), std::make_pair(1, 4),
                                         std::make_pair(2, 1), std::make_pair(2, 2)),
                       ::testing::Values(BatchVariant::kOrdinary, BatchVariant::kUnpadded,
                                         BatchVariant::kInputScattered, BatchVariant::kSequenceParallel),
                       ::testing::Values(ReductionPolicy::kAr, ReductionPolicy::kRsRsv),
                       ::testing::Values(std::string("AF"), std::string("MF"), std::string("NF")),
                       ::testing::Values(0, 2)),
    Name);

// ---- Rules and errors. ----
struct OneRank {
  OneRank() : t(*Topology::Make(1, 1, 0)), layer(*BuildOneLayer(t)) {}
  ForwardBatch Batch(int64_t rows) {
    ForwardBatch b(1, BatchVariant::kOrdinary, t, {rows});
    b.comms = self.comms();
    return b;
  }
  Topology t;
  SelfComms self;
  std::unique_ptr<OneLayer> layer;
};

TEST(Capture, FfnPrepareRefusesACaptureAndTheValueStaysUsable) {
  OneRank s;
  ForwardBatch batch = s.Batch(3);
  AuxCollector aux;
  Hidden h = *Start(batch, Rows(1, 3));
  Tensor x = *s.layer->attn->Prepare(h, batch);
  h = *s.layer->attn->Finish(PartialOutput(x, 1), batch);
  auto refused = s.layer->ffn->Prepare(h, batch, PrepareCapture{aux.capture(), nullptr});
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(refused.status().message(),
            "ffn prepare does not take a capture; capture at an attention's prepare or at the final norm");
  EXPECT_TRUE(s.layer->ffn->Prepare(h, batch).ok());
  EXPECT_TRUE(aux.values().empty());
}

TEST(Capture, AtStackEntryTheInputBeforeInitResidualIsCaptured) {
  const Topology t = *Topology::Make(1, 1, 0);
  StackConfig config{1, ReductionPolicy::kAr, 3, "AF"};
  config.mhc_streams = 2;  // init_residual widens; the capture is the input itself
  auto stack = *SyntheticStack::Build(config, t);
  SelfComms self;
  ForwardBatch batch(1, BatchVariant::kOrdinary, t, {3});
  batch.comms = self.comms();
  const Tensor input = Rows(2, 3);
  AuxCollector aux;
  Hidden h = *Start(batch, input);
  ASSERT_TRUE(stack->layers()[0].stages[0].boundary->Prepare(h, batch, PrepareCapture{aux.capture(), nullptr}).ok());
  ASSERT_EQ(aux.values().size(), 1u);
  EXPECT_TRUE(BitEqual(aux.values()[0], input));
  EXPECT_EQ(aux.copies(), 1);  // borrowed: the collector copied it
}

TEST(Capture, TheCollectorCopiesBorrowedValuesAndKeepsOwnedOnes) {
  AuxCollector aux;
  Tensor t = Rows(3, 2);
  const Tensor before = t.Clone();
  aux.capture()(t, false);
  aux.capture()(t, true);
  std::vector<float> zero(2 * kHidden, 0.0f);
  SEAM_CHECK_OK(CopyInto(Tensor::FromFloats(zero, {2, kHidden}), t));
  EXPECT_TRUE(BitEqual(aux.values()[0], before));  // the copy survived the write
  EXPECT_TRUE(BitEqual(aux.values()[1], t));       // owned: the same storage
  EXPECT_EQ(aux.copies(), 1);
  EXPECT_EQ(aux.owned(), 1);
}

TEST(Capture, CaptureOutputSumsADeclaredSumOnACopyAndCompletesDynamicWork) {
  auto registry = std::make_shared<comm::RecordingRegistry>(comm::CommOptions{absl::Seconds(5)});
  auto results = RunRanks(2, 1, comm::MakeRecordingGroupFactory(registry),
                          [&](const Topology& t, const StageComms& comms) -> absl::Status {
    // Two layers so the first FFN leaves its sum to the next attention's input.
    NormParams norm = UnitNorm();
    LayerStack stack(LayerStackOptions{t, ReductionPolicy::kAr});
    SEAM_ASSIGN_OR_RETURN(auto b, SEAM_APPEND_STAGES(0, StageItem{DeclareAttn(), &norm}, StageItem{DeclareFfn(), &norm},
                                                      StageItem{DeclareAttn(), &norm}));
    SEAM_RETURN_IF_ERROR(stack.Close());
    ForwardBatch batch(1, BatchVariant::kOrdinary, t, {4});
    batch.comms = comms;
    const Tensor input = Rows(5, 4);
    SEAM_ASSIGN_OR_RETURN(Hidden h, Start(batch, input));
    SEAM_ASSIGN_OR_RETURN(Tensor x, b[0]->Prepare(h, batch));
    SEAM_ASSIGN_OR_RETURN(h, b[0]->Finish(PartialOutput(x, 2), batch));
    SEAM_ASSIGN_OR_RETURN(CapturedOutput a, CaptureOutput(h, batch));
    // Declared (always-partial) sum: summed on a copy, still owed on the main value.
    if (!a.hidden.owes_sum() || batch.stream->pending()->owed != SumGroup::kAttnTp) {
      return absl::InternalError("the declared sum was consumed");
    }
    std::vector<float> want = input.ToFloats(), xv = x.ToFloats();
    for (size_t i = 0; i < want.size(); ++i) want[i] += xv[i] / 2;
    if (!BitEqual(a.snapshot, Tensor::FromFloats(want, {4, kHidden}))) return absl::InternalError("snapshot differs");
    SEAM_ASSIGN_OR_RETURN(x, b[1]->Prepare(a.hidden, batch));
    SEAM_ASSIGN_OR_RETURN(h, b[1]->Finish(PartialOutput(x, 2), batch));
    if (batch.stream->pending()->owed == SumGroup::kNone) return absl::InternalError("the ffn left no sum");
    SEAM_ASSIGN_OR_RETURN(CapturedOutput f, CaptureOutput(h, batch));
    // Work the exit left per batch: completed on the main contribution.
    if (f.hidden.owes_sum() || batch.stream->pending()->owed != SumGroup::kNone) {
      return absl::InternalError("the dynamic sum was not completed on the main contribution");
    }
    SEAM_ASSIGN_OR_RETURN(x, b[2]->Prepare(f.hidden, batch));
    return absl::OkStatus();
  });
  for (int r = 0; r < 2; ++r) ASSERT_TRUE(results[r].ok()) << "rank " << r << ": " << results[r];
  ASSERT_TRUE(registry->ExpectSameSequenceInEveryGroup().ok());
}

TEST(Capture, CaptureOutputRequiresAPlainUpdate) {
  const Topology t = *Topology::Make(1, 1, 0);
  StackConfig config{1, ReductionPolicy::kAr, 3, "AF"};
  config.mhc_streams = 2;
  auto stack = *SyntheticStack::Build(config, t);
  auto& attn = *stack->layers()[0].stages[0].boundary;
  SelfComms self;
  ForwardBatch batch(1, BatchVariant::kOrdinary, t, {3});
  batch.comms = self.comms();
  Hidden h = *Start(batch, Rows(2, 3));
  ASSERT_TRUE(attn.Prepare(h, batch).ok());
  h = *attn.Finish(Rows(4, 3), batch);
  auto c = CaptureOutput(h, batch);
  EXPECT_EQ(c.status(), errors::SnapshotNeedsPlainUpdate("mhc_post"));
  EXPECT_TRUE(Fold(h, batch).ok());  // the refused call left the value usable
}

// A terminal MoE whose provider always defers, on one rank.
class AlwaysDefer final : public FusionProvider {
 public:
  std::vector<std::shared_ptr<InputFusion>> InputFusions(const StagePlan&) const override { return {}; }
  bool CanDeferFinalize(const StagePlan&, const ForwardBatch&) const override { return true; }
};

absl::StatusOr<Hidden> HandoffOnOneRank(const std::vector<std::shared_ptr<StageBoundary>>& b, ForwardBatch& batch) {
  SEAM_ASSIGN_OR_RETURN(Hidden h, Start(batch, Rows(5, 4)));
  SEAM_ASSIGN_OR_RETURN(Tensor x, b[0]->Prepare(h, batch));
  SEAM_ASSIGN_OR_RETURN(h, b[0]->Finish(x, batch));
  SEAM_ASSIGN_OR_RETURN(x, b[1]->Prepare(h, batch));
  SEAM_ASSIGN_OR_RETURN(auto scope, b[1]->Exit(batch));
  const Tensor e = Tensor::Zeros({4, 1, kHidden}, DType::kF32);
  return scope->FinishDeferred(std::make_shared<DeferredFinalize>(
      e, Tensor::FromFloats(std::vector<float>(4, 1.0f), {4, 1}), []() -> absl::StatusOr<Tensor> { return Rows(9, 4); }));
}

TEST(Capture, FinalNormCaptureRefusesAFusedFinalizeHandoffAndCapturesAnUnfusedOne) {
  const Topology t = *Topology::Make(1, 1, 0);
  NormParams norm = UnitNorm();
  LayerStack stack(LayerStackOptions{t, ReductionPolicy::kAr});
  StageOptions fusions;
  fusions.fusions = std::make_shared<AlwaysDefer>();
  auto b = *SEAM_APPEND_STAGES(0, StageItem{DeclareAttn(), &norm}, StageItem{DeclareFfn({true}), &norm, fusions});
  ASSERT_TRUE(stack.Close().ok());
  SelfComms self;
  auto service = MakeFinalizeNormService();
  for (bool fused : {true, false}) {
    ForwardBatch batch(1, BatchVariant::kOrdinary, t, {4});
    batch.comms = self.comms();
    auto h = HandoffOnOneRank(b, batch);
    ASSERT_TRUE(h.ok()) << h.status();
    AuxCollector aux;
    FinalNormOptions options;
    options.capture = aux.capture();
    options.finalize_norm = fused ? service.get() : nullptr;
    auto out = FinalNorm(*h, batch, norm, options);
    if (fused) {
      EXPECT_EQ(out.status(), errors::CaptureWithFinalizeHandoff());
      EXPECT_THAT(std::string(out.status().message()), HasSubstr("cannot capture a finalize handoff"));
    } else {
      ASSERT_TRUE(out.ok()) << out.status();
      ASSERT_EQ(aux.values().size(), 1u);
      EXPECT_EQ(aux.copies(), 1);  // final_norm always passes a borrowed value
    }
  }
}

}  // namespace
}  // namespace seam::boundary::testing
