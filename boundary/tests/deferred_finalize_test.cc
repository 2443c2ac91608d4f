// Deferred MoE finalize: a terminal MoE hands its finalize to the final norm
// when its provider accepts the batch; the final norm runs the fused service
// or completes the handoff unfused. Both equal the undeferred single-rank run
// bit for bit on the exact grid. Plus every refusal of the design.
#include <atomic>
#include <tuple>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "grid_case.h"
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
  void TearDown() override { std::printf("deferred-finalize grid: %d cases ran\n", cases_run.load()); }
};
const auto* const reporter = ::testing::AddGlobalTestEnvironment(new CountReporter);

// Defers when `accept` says so for the batch; offers no input candidates.
class DeferringProvider final : public FusionProvider {
 public:
  explicit DeferringProvider(std::function<bool(const ForwardBatch&)> accept) : accept_(std::move(accept)) {}
  std::vector<std::shared_ptr<InputFusion>> InputFusions(const StagePlan&) const override { return {}; }
  bool CanDeferFinalize(const StagePlan&, const ForwardBatch& batch) const override {
    ++asked;
    return accept_(batch);
  }
  mutable std::atomic<int> asked{0};

 private:
  std::function<bool(const ForwardBatch&)> accept_;
};

using Param = std::tuple<std::pair<int, int>, BatchVariant, ReductionPolicy, std::string, bool>;
class DeferredFinalizeGrid : public ::testing::TestWithParam<Param> {};

TEST_P(DeferredFinalizeGrid, HandoffEqualsTheUndeferredSingleRankRunBitForBit) {
  const auto& [layout, variant, policy, pattern, fused] = GetParam();
  if (variant == BatchVariant::kUnpadded && layout.first > 1) GTEST_SKIP() << "UNPADDED: no attention DP";
  auto service = MakeFinalizeNormService();
  // The decision takes the batch: this provider defers only batches with an odd microbatch id.
  auto provider = std::make_shared<DeferringProvider>([](const ForwardBatch& b) { return b.microbatch_id % 2 == 1; });
  for (const std::vector<int64_t>& dp_rows : GridRowPatterns(layout.first)) {
    for (int layers : {1, 2}) {
      GridCase c{layout.first, layout.second, variant, policy, dp_rows, layers};
      c.pattern = pattern;
      c.fusions = provider;
      c.finalize_norm = fused ? service.get() : nullptr;
      for (uint64_t id : {1, 2}) {  // deferred, then not
        c.on_batch = [id](ForwardBatch& b) { b.microbatch_id = id; };
        auto registry = std::make_shared<comm::RecordingRegistry>(comm::CommOptions{absl::Seconds(20)});
        const absl::Status s = RunGridCase(c, comm::MakeRecordingGroupFactory(registry));
        ASSERT_TRUE(s.ok()) << c.ToString() << " microbatch " << id << ": " << s;
        const absl::Status same = registry->ExpectSameSequenceInEveryGroup();
        ASSERT_TRUE(same.ok()) << c.ToString() << ": " << same;
        ++cases_run;
      }
    }
  }
  EXPECT_GT(provider->asked.load(), 0);
}

std::string Name(const ::testing::TestParamInfo<Param>& info) {
  const auto& [layout, variant, policy, pattern, fused] = info.param;
  return GridName(layout, variant, policy) + "_" + pattern + (fused ? "_service" : "_unfused");
}

INSTANTIATE_TEST_SUITE_P(
    Grid, DeferredFinalizeGrid,
    ::testing::Combine(::testing::Values(std::make_pair(1, 1), std::make_pair(1, 2), std::make_pair(1, 4),
                                         std::make_pair(2, 1), std::make_pair(2, 2)),
                       ::testing::Values(BatchVariant::kOrdinary, BatchVariant::kUnpadded,
                                         BatchVariant::kInputScattered, BatchVariant::kSequenceParallel),
                       ::testing::Values(ReductionPolicy::kAr, ReductionPolicy::kRsRsv),
                       ::testing::Values(std::string("AE"), std::string("ME")), ::testing::Bool()),
    Name);

// One attention + terminal MoE on one rank with a provider that always defers.
struct MoeLayer {
  NormParams norm = UnitNorm();
  std::shared_ptr<StageBoundary> attn, moe;
};
std::unique_ptr<MoeLayer> BuildMoeLayer(bool defer) {
  auto layer = std::make_unique<MoeLayer>();
  auto t = *Topology::Make(1, 1, 0);
  LayerStack stack(LayerStackOptions{t, ReductionPolicy::kAr});
  StageOptions fusions;
  fusions.fusions = std::make_shared<DeferringProvider>([defer](const ForwardBatch&) { return defer; });
  auto b = SEAM_APPEND_STAGES(0, StageItem{DeclareAttn(), &layer->norm},
                              StageItem{DeclareFfn({/*sparse=*/true}), &layer->norm, fusions});
  SEAM_CHECK_OK(b.status());
  SEAM_CHECK_OK(stack.Close());
  layer->attn = (*b)[0];
  layer->moe = (*b)[1];
  return layer;
}

std::shared_ptr<const DeferredFinalize> TestHandoff(int64_t rows, std::atomic<int>* completed) {
  const Tensor e = Tensor::Zeros({rows, 1, kHidden}, DType::kF32);
  std::vector<float> ones(rows, 1.0f);
  return std::make_shared<DeferredFinalize>(e, Tensor::FromFloats(ones, {rows, 1}),
                                            [rows, completed]() -> absl::StatusOr<Tensor> {
                                              ++*completed;
                                              return Rows(9, rows);
                                            });
}

// Runs the layer up to the MoE's exit scope; returns the handoff's value.
absl::StatusOr<Hidden> ToHandoff(MoeLayer& layer, ForwardBatch& batch, std::atomic<int>* completed) {
  SEAM_ASSIGN_OR_RETURN(Hidden h, Start(batch, Rows(5, 4)));
  SEAM_ASSIGN_OR_RETURN(Tensor x, layer.attn->Prepare(h, batch));
  SEAM_ASSIGN_OR_RETURN(h, layer.attn->Finish(x, batch));
  SEAM_ASSIGN_OR_RETURN(x, layer.moe->Prepare(h, batch));
  SEAM_ASSIGN_OR_RETURN(auto scope, layer.moe->Exit(batch));
  if (!scope->defer_moe_finalize()) return errors::HandoffWithoutDefer();
  return scope->FinishDeferred(TestHandoff(4, completed));
}

TEST(DeferredFinalize, HandoffWhileTheDeferFlagIsOffFailsInFinish) {
  auto layer = BuildMoeLayer(/*defer=*/false);
  SelfComms self;
  ForwardBatch batch(1, BatchVariant::kOrdinary, *Topology::Make(1, 1, 0), {4});
  batch.comms = self.comms();
  std::atomic<int> completed{0};
  Hidden h = *Start(batch, Rows(5, 4));
  Tensor x = *layer->attn->Prepare(h, batch);
  h = *layer->attn->Finish(x, batch);
  x = *layer->moe->Prepare(h, batch);
  auto scope = *layer->moe->Exit(batch);
  EXPECT_FALSE(scope->defer_moe_finalize());
  auto refused = scope->FinishDeferred(TestHandoff(4, &completed));
  EXPECT_EQ(refused.status(), errors::HandoffWithoutDefer());
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("while defer_moe_finalize is false"));
}

TEST(DeferredFinalize, SnapshotRefusesAHandoff) {
  auto layer = BuildMoeLayer(true);
  SelfComms self;
  ForwardBatch batch(1, BatchVariant::kOrdinary, *Topology::Make(1, 1, 0), {4});
  batch.comms = self.comms();
  std::atomic<int> completed{0};
  auto h = ToHandoff(*layer, batch, &completed);
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->tensor().status().code(), absl::StatusCode::kFailedPrecondition);  // an opaque handle
  EXPECT_EQ(Snapshot(batch).status(), errors::SnapshotOfFinalizeHandoff());
  EXPECT_EQ(completed.load(), 0);
}

TEST(DeferredFinalize, CompleteOutputRunsTheProducersUnfusedFinalize) {
  auto layer = BuildMoeLayer(true);
  SelfComms self;
  ForwardBatch batch(1, BatchVariant::kOrdinary, *Topology::Make(1, 1, 0), {4});
  batch.comms = self.comms();
  std::atomic<int> completed{0};
  auto h = ToHandoff(*layer, batch, &completed);
  ASSERT_TRUE(h.ok()) << h.status();
  auto done = CompleteOutput(*h, batch);
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_EQ(completed.load(), 1);
  EXPECT_TRUE(BitEqual(*done->tensor(), Rows(9, 4)));
  EXPECT_EQ(batch.stream->pending()->deferred, nullptr);
}

TEST(DeferredFinalize, FinalNormWithoutServiceCompletesTheHandoffUnfusedFirst) {
  auto layer = BuildMoeLayer(true);
  SelfComms self;
  ForwardBatch batch(1, BatchVariant::kOrdinary, *Topology::Make(1, 1, 0), {4});
  batch.comms = self.comms();
  std::atomic<int> completed{0};
  auto h = ToHandoff(*layer, batch, &completed);
  ASSERT_TRUE(h.ok()) << h.status();
  NormParams norm = UnitNorm();
  auto out = FinalNorm(*h, batch, norm);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(completed.load(), 1);
  EXPECT_EQ(batch.stream, nullptr);
}

TEST(DeferredFinalize, OnlyATerminalMoeHasTheHandoffPath) {
  auto layer = BuildMoeLayer(true);
  bool found = false;
  for (const ExitOption& o : layer->moe->plan().Find(BatchVariant::kOrdinary)->exit.options) {
    found |= o.choice == ExitChoice::kDeferFinalize;
  }
  EXPECT_TRUE(found);
  for (const ExitOption& o : layer->attn->plan().Find(BatchVariant::kOrdinary)->exit.options) {
    EXPECT_NE(o.choice, ExitChoice::kDeferFinalize);
  }
}

}  // namespace
}  // namespace seam::boundary::testing
