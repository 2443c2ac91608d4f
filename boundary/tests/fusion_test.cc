// Fusion providers at a consumer's input: a declining candidate leaves the
// built-in path in charge, an accepting one replaces the fused all-reduce +
// add + norm step bit for bit; FFN stages with fusions exit through a scope.
#include <atomic>
#include <map>
#include <mutex>
#include <thread>

#include "absl/strings/str_cat.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "rank_threads.h"
#include "seam/boundary/fusion.h"
#include "seam/comm/communicator.h"
#include "seam/comm/recording_communicator.h"
#include "seam/core/status.h"
#include "seam/kernels/ops.h"
#include "stage_fixture.h"

namespace seam::boundary::testing {
namespace {

// A candidate completing `group`; it either declines or does the all-reduce and the fused kernel itself.
class CountingFusion final : public InputFusion {
 public:
  CountingFusion(SumGroup group, bool accept, std::atomic<int>* calls) : group_(group), accept_(accept), calls_(calls) {}
  std::string name() const override { return accept_ ? "accepting" : "declining"; }
  SumGroup completes() const override { return group_; }
  absl::StatusOr<bool> TryCompleteAddNorm(const Tensor& contribution, const Tensor& residual, const NormParams& norm,
                                          const Tensor& out, comm::Communicator& group) override {
    ++*calls_;
    if (!accept_) return false;
    const Tensor c = contribution.is_contiguous() ? contribution : contribution.Clone();
    SEAM_RETURN_IF_ERROR(group.AllReduce(c));
    SEAM_RETURN_IF_ERROR(kernels::FusedAddRmsNorm(c, residual, norm.weight, norm.eps, out));
    return true;
  }

 private:
  SumGroup group_;
  bool accept_;
  std::atomic<int>* calls_;
};

class CountingProvider final : public FusionProvider {
 public:
  CountingProvider(bool accept, bool defer = false) : accept_(accept), defer_(defer) {}
  std::vector<std::shared_ptr<InputFusion>> InputFusions(const StagePlan&) const override {
    return {std::make_shared<CountingFusion>(SumGroup::kAttnTp, accept_, &calls),
            std::make_shared<CountingFusion>(SumGroup::kTp, accept_, &calls)};
  }
  bool CanDeferFinalize(const StagePlan&, const ForwardBatch&) const override { return defer_; }
  mutable std::atomic<int> calls{0};

 private:
  bool accept_, defer_;
};

// Two attention → FFN layers; every stage gets `fusions` (may be null).
struct TwoLayers {
  NormParams norms[5] = {UnitNorm(), UnitNorm(), UnitNorm(), UnitNorm(), UnitNorm()};
  std::vector<std::shared_ptr<StageBoundary>> stages;
};

absl::StatusOr<std::unique_ptr<TwoLayers>> Build(const Topology& t, std::shared_ptr<FusionProvider> fusions) {
  auto s = std::make_unique<TwoLayers>();
  LayerStack stack(LayerStackOptions{t, ReductionPolicy::kAr});
  for (int l = 0; l < 2; ++l) {
    SEAM_ASSIGN_OR_RETURN(auto b, SEAM_APPEND_STAGES(l, StageItem{DeclareAttn(), &s->norms[2 * l], {fusions}},
                                                     StageItem{DeclareFfn(), &s->norms[2 * l + 1], {fusions}}));
    s->stages.insert(s->stages.end(), b.begin(), b.end());
  }
  SEAM_RETURN_IF_ERROR(stack.Close());
  return s;
}

absl::StatusOr<Tensor> Forward(const TwoLayers& s, ForwardBatch& batch, const Tensor& input) {
  const Topology& t = batch.rows.topology();
  SEAM_ASSIGN_OR_RETURN(Hidden h, Start(batch, input));
  for (const auto& stage : s.stages) {
    SEAM_ASSIGN_OR_RETURN(Tensor x, stage->Prepare(h, batch));
    const bool ffn = stage->declaration().kind == StageKind::kFfn;
    const Tensor out = PartialOutput(x, ffn ? t.tp : t.attn_tp());
    if (ffn && stage->has_fusions()) {
      SEAM_ASSIGN_OR_RETURN(auto scope, stage->Exit(batch));
      SEAM_ASSIGN_OR_RETURN(h, scope->Finish(out));
    } else {
      SEAM_ASSIGN_OR_RETURN(h, stage->Finish(out, batch));
    }
  }
  return FinalNorm(h, batch, s.norms[4]);
}

// Runs the two layers on dp=1, tp=2 with `fusions`; returns rank 0's output.
Tensor RunTp2(const std::shared_ptr<FusionProvider>& fusions, const Tensor& input) {
  auto registry = std::make_shared<comm::RecordingRegistry>(comm::CommOptions{absl::Seconds(5)});
  std::vector<Tensor> outs(2);
  auto results = RunRanks(2, 1, comm::MakeRecordingGroupFactory(registry),
                          [&](const Topology& t, const StageComms& comms) -> absl::Status {
                            SEAM_ASSIGN_OR_RETURN(auto s, Build(t, fusions));
                            ForwardBatch batch(1, BatchVariant::kOrdinary, t, {input.rows()});
                            batch.comms = comms;
                            SEAM_ASSIGN_OR_RETURN(outs[t.tp_rank], Forward(*s, batch, input));
                            return absl::OkStatus();
                          });
  for (int r = 0; r < 2; ++r) EXPECT_TRUE(results[r].ok()) << "rank " << r << ": " << results[r];
  EXPECT_TRUE(registry->ExpectSameSequenceInEveryGroup().ok()) << registry->ExpectSameSequenceInEveryGroup();
  EXPECT_TRUE(BitEqual(outs[0], outs[1]));
  return outs[0];
}

TEST(FusionTest, DecliningCandidateLeavesTheBuiltInPath) {
  const Tensor input = Rows(31, 6);
  const Tensor reference = RunTp2(nullptr, input);
  auto declining = std::make_shared<CountingProvider>(false);
  EXPECT_TRUE(BitEqual(RunTp2(declining, input), reference));
  // Per rank: both FFN inputs (ATTN_TP sum) and the second attention's input (TP sum).
  EXPECT_EQ(declining->calls.load(), 2 * 3);
}

TEST(FusionTest, AcceptingCandidateReplacesTheFusedStepBitForBit) {
  const Tensor input = Rows(32, 7);
  const Tensor reference = RunTp2(nullptr, input);
  auto accepting = std::make_shared<CountingProvider>(true);
  EXPECT_TRUE(BitEqual(RunTp2(accepting, input), reference));
  EXPECT_EQ(accepting->calls.load(), 2 * 3);
  auto t = *Topology::Make(2, 1, 0);
  auto s = Build(t, nullptr);
  ASSERT_TRUE(s.ok());
  for (int i : {1, 2, 3}) {
    const auto& entries = (*s)->stages[i]->plan().Find(BatchVariant::kOrdinary)->entries;
    bool fused = false;
    for (const EntryPath& e : entries) {
      for (const Step& step : e.steps) fused |= step.op == StepOp::kFusedInput;
    }
    EXPECT_TRUE(fused) << "stage " << i << " has a fused_all_reduce_add_norm entry";
  }
}

struct SingleRankFfn {
  explicit SingleRankFfn(std::shared_ptr<FusionProvider> fusions) : t(*Topology::Make(1, 1, 0)) {
    OneLayerOptions options;
    options.ffn_options.fusions = std::move(fusions);
    layer = *BuildOneLayer(t, options);
  }
  // Starts a batch and runs the attention; returns the FFN's compute output.
  Tensor EnterFfn(ForwardBatch& batch) {
    batch.comms = self.comms();
    Hidden h = *Start(batch, Rows(33, 4));
    Tensor x = *layer->attn->Prepare(h, batch);
    h = *layer->attn->Finish(PartialOutput(x, 1), batch);
    return PartialOutput(*layer->ffn->Prepare(h, batch), 1);
  }
  Topology t;
  SelfComms self;
  std::unique_ptr<OneLayer> layer;
};

// Candidates of one group are tried in the provider's order: a declining one
// hands on to the next, the first accepting one ends the search.
class OrderedFusion final : public InputFusion {
 public:
  OrderedFusion(int id, bool accept, std::mutex* mu, std::map<std::thread::id, std::vector<int>>* log)
      : id_(id), accept_(accept), mu_(mu), log_(log) {}
  std::string name() const override { return absl::StrCat("ordered", id_); }
  SumGroup completes() const override { return SumGroup::kAttnTp; }
  absl::StatusOr<bool> TryCompleteAddNorm(const Tensor& contribution, const Tensor& residual, const NormParams& norm,
                                          const Tensor& out, comm::Communicator& group) override {
    {
      std::lock_guard<std::mutex> lock(*mu_);
      (*log_)[std::this_thread::get_id()].push_back(id_);
    }
    if (!accept_) return false;
    const Tensor c = contribution.is_contiguous() ? contribution : contribution.Clone();
    SEAM_RETURN_IF_ERROR(group.AllReduce(c));
    SEAM_RETURN_IF_ERROR(kernels::FusedAddRmsNorm(c, residual, norm.weight, norm.eps, out));
    return true;
  }

 private:
  int id_;
  bool accept_;
  std::mutex* mu_;
  std::map<std::thread::id, std::vector<int>>* log_;  // per rank thread
};

class OrderedProvider final : public FusionProvider {
 public:
  std::vector<std::shared_ptr<InputFusion>> InputFusions(const StagePlan&) const override {
    return {std::make_shared<OrderedFusion>(1, false, &mu, &log), std::make_shared<OrderedFusion>(2, true, &mu, &log),
            std::make_shared<OrderedFusion>(3, true, &mu, &log)};
  }
  mutable std::mutex mu;
  mutable std::map<std::thread::id, std::vector<int>> log;
};

TEST(FusionTest, CandidatesOfOneGroupAreTriedInOrder) {
  const Tensor input = Rows(33, 5);
  const Tensor reference = RunTp2(nullptr, input);
  auto ordered = std::make_shared<OrderedProvider>();
  EXPECT_TRUE(BitEqual(RunTp2(ordered, input), reference));
  // Two FFN inputs (attention-TP sums) per rank, each: 1 declines, 2 accepts, 3 is never asked.
  ASSERT_EQ(ordered->log.size(), 2u);
  for (const auto& [thread, log] : ordered->log) EXPECT_EQ(log, (std::vector<int>{1, 2, 1, 2}));
}

TEST(FusionTest, FfnWithFusionsRejectsFinishAndExitsThroughItsScope) {
  SingleRankFfn s(std::make_shared<CountingProvider>(true));
  ForwardBatch batch(1, BatchVariant::kOrdinary, s.t, {4});
  const Tensor out = s.EnterFfn(batch);
  auto finished = s.layer->ffn->Finish(out, batch);
  EXPECT_EQ(finished.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(finished.status().message(),
            "this ffn stage has fusions: run its compute under Exit() and call the scope's Finish() once");
  auto scope = s.layer->ffn->Exit(batch);
  ASSERT_TRUE(scope.ok()) << scope.status();
  auto h = (*scope)->Finish(out);
  ASSERT_TRUE(h.ok()) << h.status();
  auto twice = (*scope)->Finish(out);
  EXPECT_EQ(twice.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(twice.status().message(), "exit scope already finished; Finish() runs once");
  auto final_out = FinalNorm(*h, batch, s.layer->final_norm);
  ASSERT_TRUE(final_out.ok()) << final_out.status();
  auto attn_exit = s.layer->attn->Exit(batch);
  EXPECT_EQ(attn_exit.status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(FusionTest, ExitScopeRestoresDeferFlagWhenComputeFails) {
  SingleRankFfn s(std::make_shared<CountingProvider>(true, /*defer=*/true));
  ForwardBatch batch(1, BatchVariant::kOrdinary, s.t, {4});
  s.EnterFfn(batch);
  batch.defer_moe_finalize = true;  // an outer scope's flag
  {
    auto scope = s.layer->ffn->Exit(batch);
    ASSERT_TRUE(scope.ok()) << scope.status();
    // A dense FFN has no handoff path: the provider's yes does not publish the flag.
    EXPECT_FALSE((*scope)->defer_moe_finalize());
    EXPECT_FALSE(batch.defer_moe_finalize);
    // Compute "fails" here: the scope goes away without Finish().
  }
  EXPECT_TRUE(batch.defer_moe_finalize);  // restored
}

}  // namespace
}  // namespace seam::boundary::testing
