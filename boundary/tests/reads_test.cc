// Reads, updates and candidates the design lets a stage declare:
// applied_at_exit (the producer applies its update at its exit and the next
// stage enters written), reads_after_attn_tp_gather (a read that needs every
// row of the attention's: no producer leaves its output on a slice before
// it; on an input-scattered batch the read waits for the gather), and separate
// attention and FFN input candidates tried in their order. Grids bit for bit
// against one rank.
#include <atomic>
#include <mutex>
#include <tuple>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "grid_case.h"
#include "rank_threads.h"
#include "seam/boundary/boundary_errors.h"
#include "seam/comm/communicator.h"
#include "seam/comm/recording_communicator.h"
#include "seam/core/status.h"
#include "seam/kernels/ops.h"
#include "stage_fixture.h"

namespace seam::boundary::testing {
namespace {

using ::testing::HasSubstr;

std::atomic<int> exit_cases{0}, read_cases{0};
class CountReporter : public ::testing::Environment {
 public:
  void TearDown() override {
    std::printf("applied_at_exit grid: %d cases ran; reads_after_attn_tp_gather grid: %d cases ran\n",
                exit_cases.load(), read_cases.load());
  }
};
const auto* const reporter = ::testing::AddGlobalTestEnvironment(new CountReporter);

using Param = std::tuple<std::pair<int, int>, BatchVariant, ReductionPolicy, std::string>;

void RunGrid(const Param& p, bool applied_at_exit, std::atomic<int>* counter) {
  const auto& [layout, variant, policy, pattern] = p;
  for (const std::vector<int64_t>& dp_rows : GridRowPatterns(layout.first)) {
    for (int layers : {1, 2}) {
      GridCase c{layout.first, layout.second, variant, policy, dp_rows, layers};
      c.pattern = pattern;
      c.applied_at_exit = applied_at_exit;
      c.reads_all_rows = !applied_at_exit;
      auto registry = std::make_shared<comm::RecordingRegistry>(comm::CommOptions{absl::Seconds(20)});
      const absl::Status s = RunGridCase(c, comm::MakeRecordingGroupFactory(registry));
      ASSERT_TRUE(s.ok()) << c.ToString() << ": " << s;
      ASSERT_TRUE(registry->ExpectSameSequenceInEveryGroup().ok()) << c.ToString();
      ++*counter;
    }
  }
}

class AppliedAtExitGrid : public ::testing::TestWithParam<Param> {};
TEST_P(AppliedAtExitGrid, UpdatesAppliedAtTheirExitsEqualSingleRankBitForBit) {
  const auto& [layout, variant, policy, pattern] = GetParam();
  if (variant == BatchVariant::kUnpadded && layout.first > 1) GTEST_SKIP() << "UNPADDED: no attention DP";
  RunGrid(GetParam(), true, &exit_cases);
}

class ReadsAllRowsGrid : public ::testing::TestWithParam<Param> {};
TEST_P(ReadsAllRowsGrid, AReadOfEveryRowEqualsSingleRankBitForBit) {
  const auto& [layout, variant, policy, pattern] = GetParam();
  if (variant == BatchVariant::kUnpadded && layout.first > 1) GTEST_SKIP() << "UNPADDED: no attention DP";
  RunGrid(GetParam(), false, &read_cases);
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

INSTANTIATE_TEST_SUITE_P(Grid, AppliedAtExitGrid,
                         ::testing::Combine(kLayouts, kVariants, kPolicies,
                                            ::testing::Values(std::string("AF"), std::string("MF"))),
                         Name);
INSTANTIATE_TEST_SUITE_P(Grid, ReadsAllRowsGrid,
                         ::testing::Combine(kLayouts, kVariants, kPolicies,
                                            ::testing::Values(std::string("AF"), std::string("MF"), std::string("AFF"))),
                         Name);

std::unique_ptr<SyntheticStack> Stack(const Topology& t, ReductionPolicy policy, bool at_exit, bool all_rows) {
  StackConfig config{2, policy, 3, "AF"};
  config.applied_at_exit = at_exit;
  config.reads_all_rows = all_rows;
  return *SyntheticStack::Build(config, t);
}

TEST(Reads, AnUpdateAppliedAtExitLeavesTheNextStageWritten) {
  auto stack = Stack(*Topology::Make(4, 2, 1), ReductionPolicy::kRsRsv, true, false);
  for (const auto& layer : stack->layers()) {
    for (const auto& st : layer.stages) {
      for (const ExitOption& o : st.boundary->plan().Find(BatchVariant::kOrdinary)->exit.options) {
        EXPECT_EQ(o.leaves.state, StreamState::kWritten) << ExitChoiceName(o.choice);
        ASSERT_FALSE(o.steps.empty());
        EXPECT_EQ(o.steps.back().op, StepOp::kApplyUpdate);
      }
    }
  }
  EXPECT_EQ(PipelineHandoffState(stack->layers()[0].stages[0].boundary->declaration(), BatchVariant::kOrdinary,
                                 ReductionPolicy::kAr),
            StreamState::kWritten);
}

TEST(Reads, NoProducerLeavesItsOutputOnASliceBeforeAReadOfEveryRow) {
  const Topology t = *Topology::Make(4, 2, 1);
  auto reads = Stack(t, ReductionPolicy::kRsRsv, false, true);
  auto plain = Stack(t, ReductionPolicy::kRsRsv, false, false);
  auto scatters = [](const SyntheticStack& s) {
    int n = 0;
    for (const ExitOption& o : s.layers()[0].stages[1].boundary->plan().Find(BatchVariant::kOrdinary)->exit.options) {
      n += o.choice == ExitChoice::kReduceScatterV || o.choice == ExitChoice::kReduceScatterFixed;
    }
    return n;
  };
  EXPECT_EQ(scatters(*reads), 0);
  EXPECT_GT(scatters(*plain), 0);
  // An input-scattered batch keeps the residual on slices: the read waits for
  // the gather (update on the slice, gather the residual, read every row).
  const auto& attn = *reads->layers()[1].stages[0].boundary;
  const VariantPaths* scattered = attn.plan().Find(BatchVariant::kInputScattered);
  ASSERT_NE(scattered, nullptr);
  const EntryPath* e = scattered->FindEntry(IncomingForm{StreamState::kWritten, RowForm::kAttnTpSlice,
                                                         SumGroup::kNone, RowForm::kAttnTpSlice});
  ASSERT_NE(e, nullptr);
  std::vector<std::string> steps;
  for (const Step& s : e->steps) steps.push_back(s.ToString());
  EXPECT_EQ(steps, (std::vector<std::string>{"gather_residual(attn_tp: attn_tp_slice->dp_rows)", "norm_gathered"}));
}

TEST(Reads, AFinalReadOfEveryRowKeepsTheLastFfnOffTheSlices) {
  const Topology t = *Topology::Make(4, 2, 1);
  auto scatters = [](const SyntheticStack& s) {
    int n = 0;
    const auto& last = s.layers().back().stages.back();
    EXPECT_TRUE(last.boundary->declaration().place.terminal);
    for (const ExitOption& o : last.boundary->plan().Find(BatchVariant::kOrdinary)->exit.options) {
      n += o.choice == ExitChoice::kReduceScatterV || o.choice == ExitChoice::kReduceScatterFixed;
    }
    return n;
  };
  EXPECT_EQ(scatters(*Stack(t, ReductionPolicy::kRsRsv, false, true)), 0);
  EXPECT_GT(scatters(*Stack(t, ReductionPolicy::kRsRsv, false, false)), 0);
}

std::atomic<int> gather_cases{0};

TEST(Reads, TheFinalReadsOwnAttnTpGatherIsTriedFirstAndMatchesTheBuiltIn) {
  for (auto [dp, attn_tp, variant, policy] :
       {std::make_tuple(1, 2, BatchVariant::kInputScattered, ReductionPolicy::kAr),
        std::make_tuple(1, 4, BatchVariant::kInputScattered, ReductionPolicy::kAr),
        std::make_tuple(2, 2, BatchVariant::kInputScattered, ReductionPolicy::kRsRsv),
        std::make_tuple(2, 2, BatchVariant::kOrdinary, ReductionPolicy::kRsRsv),
        std::make_tuple(1, 2, BatchVariant::kOrdinary, ReductionPolicy::kRs)}) {
    for (bool accept : {true, false}) {
      std::atomic<int> calls{0};
      for (const std::vector<int64_t>& dp_rows : GridRowPatterns(dp)) {
        GridCase c{dp, attn_tp, variant, policy, dp_rows, 2};
        c.final_gather = [&calls, accept](const Tensor& slice, const BatchRows& rows, comm::Communicator& g,
                                          const Tensor& out) -> absl::StatusOr<bool> {
          ++calls;
          if (!accept) return false;
          SEAM_RETURN_IF_ERROR(g.AllGatherV(slice, rows.AttnTpSliceCounts(), out));
          return true;
        };
        auto registry = std::make_shared<comm::RecordingRegistry>(comm::CommOptions{absl::Seconds(20)});
        const absl::Status s = RunGridCase(c, comm::MakeRecordingGroupFactory(registry));
        ASSERT_TRUE(s.ok()) << c.ToString() << (accept ? " accepting" : " declining") << ": " << s;
        ++gather_cases;
      }
      EXPECT_GT(calls.load(), 0) << dp << "x" << attn_tp << " " << BatchVariantName(variant);
    }
  }
  std::printf("final-read gather grid: %d cases ran\n", gather_cases.load());
}

TEST(Reads, AReadDeclaredAfterTheDpGatherMustSayItsCapabilities) {
  // The declaration says the read runs after the gather; the plain read says
  // otherwise: refused when the stage is appended.
  NormParams norm = UnitNorm();
  StageDeclaration ffn = DeclareFfn();
  ffn.readout_caps.reads_before_dp_gather = false;
  LayerStack stack(LayerStackOptions{*Topology::Make(2, 2, 0), ReductionPolicy::kAr});
  auto appended = SEAM_APPEND_STAGES(0, StageItem{DeclareAttn(), &norm},
                                     StageItem{ffn, &norm, {}, std::make_shared<AddRmsNormRead>(&norm)});
  EXPECT_EQ(appended.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(appended.status().message()),
              HasSubstr("read's capabilities differ from the declaration's readout_caps"));
}

// ---- Separate attention and FFN input candidates, tried in order. ----
class NamedFusion final : public InputFusion {
 public:
  NamedFusion(std::string name, SumGroup group, bool accept, std::vector<std::string>* log, std::mutex* mu)
      : name_(std::move(name)), group_(group), accept_(accept), log_(log), mu_(mu) {}
  std::string name() const override { return name_; }
  SumGroup completes() const override { return group_; }
  absl::StatusOr<bool> TryCompleteAddNorm(const Tensor& c, const Tensor& r, const NormParams& norm, const Tensor& out,
                                          comm::Communicator& group) override {
    {
      std::lock_guard<std::mutex> lock(*mu_);
      log_->push_back(name_);
    }
    if (!accept_) return false;
    const Tensor sum = c.is_contiguous() ? c : c.Clone();
    SEAM_RETURN_IF_ERROR(group.AllReduce(sum));
    SEAM_RETURN_IF_ERROR(kernels::FusedAddRmsNorm(sum, r, norm.weight, norm.eps, out));
    return true;
  }

 private:
  std::string name_;
  SumGroup group_;
  bool accept_;
  std::vector<std::string>* log_;
  std::mutex* mu_;
};

class SplitProvider final : public FusionProvider {
 public:
  explicit SplitProvider(std::vector<std::string>* log) : log_(log) {}
  std::vector<std::shared_ptr<InputFusion>> InputFusions(const StagePlan&) const override { return {}; }
  std::vector<std::shared_ptr<InputFusion>> AttnInputFusions(const StagePlan&) const override {
    return {std::make_shared<NamedFusion>("attn-first", SumGroup::kTp, false, log_, &mu_),
            std::make_shared<NamedFusion>("attn-second", SumGroup::kTp, true, log_, &mu_),
            std::make_shared<NamedFusion>("attn-third", SumGroup::kTp, true, log_, &mu_)};
  }
  std::vector<std::shared_ptr<InputFusion>> FfnInputFusions(const StagePlan&) const override {
    return {std::make_shared<NamedFusion>("ffn-only", SumGroup::kAttnTp, true, log_, &mu_)};
  }

 private:
  std::vector<std::string>* log_;
  mutable std::mutex mu_;
};

TEST(Reads, AttentionAndFfnInputsTryTheirOwnCandidatesInOrder) {
  const Tensor input = Rows(8, 4);
  std::vector<std::vector<std::string>> logs(2);
  std::vector<Tensor> outs(2), plain(2);
  auto registry = std::make_shared<comm::RecordingRegistry>(comm::CommOptions{absl::Seconds(5)});
  auto results = RunRanks(2, 1, comm::MakeRecordingGroupFactory(registry),
                          [&](const Topology& t, const StageComms& comms) -> absl::Status {
    for (bool fused : {true, false}) {
      NormParams n[4] = {UnitNorm(), UnitNorm(), UnitNorm(), UnitNorm()}, final_norm = UnitNorm();
      StageOptions with;
      if (fused) with.fusions = std::make_shared<SplitProvider>(&logs[t.tp_rank]);
      LayerStack stack(LayerStackOptions{t, ReductionPolicy::kAr});
      SEAM_ASSIGN_OR_RETURN(auto b, SEAM_APPEND_STAGES(0, StageItem{DeclareAttn(), &n[0], with},
                                                       StageItem{DeclareFfn(), &n[1], with},
                                                       StageItem{DeclareAttn(), &n[2], with},
                                                       StageItem{DeclareFfn(), &n[3], with}));
      SEAM_RETURN_IF_ERROR(stack.Close());
      ForwardBatch batch(1, BatchVariant::kOrdinary, t, {4});
      batch.comms = comms;
      SEAM_ASSIGN_OR_RETURN(Hidden h, Start(batch, input));
      for (size_t i = 0; i < b.size(); ++i) {
        SEAM_ASSIGN_OR_RETURN(Tensor x, b[i]->Prepare(h, batch));
        const int group = i % 2 == 0 ? t.attn_tp() : t.tp;
        if (fused && i % 2 == 1) {  // an FFN with fusions exits through its scope
          SEAM_ASSIGN_OR_RETURN(auto scope, b[i]->Exit(batch));
          SEAM_ASSIGN_OR_RETURN(h, scope->Finish(PartialOutput(x, group)));
        } else {
          SEAM_ASSIGN_OR_RETURN(h, b[i]->Finish(PartialOutput(x, group), batch));
        }
      }
      SEAM_ASSIGN_OR_RETURN(Tensor out, FinalNorm(h, batch, final_norm));
      (fused ? outs : plain)[t.tp_rank] = out;
    }
    return absl::OkStatus();
  });
  for (const absl::Status& s : results) ASSERT_TRUE(s.ok()) << s;
  for (int r = 0; r < 2; ++r) {
    // Each FFN input tries the FFN candidates; the second attention's input tries the
    // attention candidates in order and stops at the first that accepts.
    EXPECT_THAT(logs[r], ::testing::ElementsAre("ffn-only", "attn-first", "attn-second", "ffn-only")) << "rank " << r;
    EXPECT_TRUE(BitEqual(outs[r], plain[r]));
  }
}

}  // namespace
}  // namespace seam::boundary::testing
