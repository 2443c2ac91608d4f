// Deferred MoE finalize: a terminal MoE hands its finalize to the final norm
// when its provider accepts the batch; the final norm runs the fused service
// or completes the handoff unfused. Both equal the undeferred single-rank run
// bit for bit on the exact grid. Plus every refusal of the design.
#include <atomic>
#include <map>
#include <tuple>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "grid_case.h"
#include "seam/boundary/boundary_errors.h"
#include "seam/comm/collective_log.h"
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
  // The handoff replaces only an exit that all-reduces (or, on one rank, owes nothing).
  const int tp = layout.first * layout.second;
  const bool scatters = variant == BatchVariant::kSequenceParallel || policy != ReductionPolicy::kAr;
  if (tp == 1 || !scatters) {
    EXPECT_GT(provider->asked.load(), 0);
  }
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

// Counts the calls it forwards to the built-in service.
class CountingService final : public FinalizeNormService {
 public:
  std::string name() const override { return inner_->name(); }
  absl::Status Finalize(const DeferredFinalize& handoff, int64_t row_offset, const Tensor& residual,
                        const NormParams& norm, const Tensor& out, comm::Communicator& group,
                        const StagePlan& plan) override {
    ++calls;
    return inner_->Finalize(handoff, row_offset, residual, norm, out, group, plan);
  }
  std::atomic<int> calls{0};

 private:
  std::shared_ptr<FinalizeNormService> inner_ = MakeFinalizeNormService();
};

// Every group's calls, rank by rank, and their bytes.
struct GroupCalls {
  std::map<std::string, std::vector<std::vector<comm::CollectiveRecord>>> calls;
  int64_t bytes = 0;
};
GroupCalls CallsOf(const comm::RecordingRegistry& registry) {
  GroupCalls g;
  for (const auto& world : registry.Worlds()) {
    g.calls[world->name()] = world->Logs();
    for (const auto& log : world->Logs()) {
      for (const comm::CollectiveRecord& r : log) g.bytes += comm::CollectiveBytes(r);
    }
  }
  return g;
}

// With more than one rank the handoff is taken where the plain exit
// all-reduces, and then moves exactly its bytes: the same calls, of the same
// shapes, in every group (a finalize that summed the [rows, K, H] expert
// outputs would move K times the bytes of its one all-reduce). Where the
// plain exit scatters (rs+rsv) the handoff is not taken.
using BytesParam = std::tuple<std::pair<int, int>, ReductionPolicy>;
class DeferredFinalizeBytes : public ::testing::TestWithParam<BytesParam> {};

TEST_P(DeferredFinalizeBytes, HandoffMovesExactlyThePlainExitsBytes) {
  const auto& [layout, policy] = GetParam();
  CountingService service;
  int64_t total = 0;
  for (const std::vector<int64_t>& dp_rows : GridRowPatterns(layout.first)) {
    GroupCalls runs[2];
    for (bool defer : {true, false}) {
      GridCase c{layout.first, layout.second, BatchVariant::kOrdinary, policy, dp_rows, 2};
      c.pattern = "AE";
      c.fusions = std::make_shared<DeferringProvider>([defer](const ForwardBatch&) { return defer; });
      c.finalize_norm = &service;
      auto registry = std::make_shared<comm::RecordingRegistry>(comm::CommOptions{absl::Seconds(20)});
      const absl::Status s = RunGridCase(c, comm::MakeRecordingGroupFactory(registry));
      ASSERT_TRUE(s.ok()) << c.ToString() << (defer ? " deferred: " : " plain: ") << s;
      runs[defer ? 0 : 1] = CallsOf(*registry);
    }
    EXPECT_EQ(runs[0].calls, runs[1].calls) << GridName(layout, BatchVariant::kOrdinary, policy);
    EXPECT_EQ(runs[0].bytes, runs[1].bytes);
    total += runs[0].bytes;
  }
  EXPECT_GT(total, 0);
  if (policy == ReductionPolicy::kAr) {
    EXPECT_GT(service.calls.load(), 0) << "the handoff was never taken";
  } else {
    EXPECT_EQ(service.calls.load(), 0) << "a handoff replaced a scattering exit";
  }
}

INSTANTIATE_TEST_SUITE_P(Layouts, DeferredFinalizeBytes,
                         ::testing::Combine(::testing::Values(std::make_pair(1, 2), std::make_pair(1, 4),
                                                              std::make_pair(2, 1), std::make_pair(2, 2)),
                                            ::testing::Values(ReductionPolicy::kAr, ReductionPolicy::kRsRsv)),
                         [](const ::testing::TestParamInfo<BytesParam>& info) {
                           return GridName(std::get<0>(info.param), BatchVariant::kOrdinary,
                                           std::get<1>(info.param));
                         });

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
