// Nonlinear residual updates and MHC: the update travels with the read
// (update_and_read), never moves before a reduction and never fuses into an
// add+norm; MHC's expanded streams cross a pipeline handoff written. Checked
// against an independent float reference of MHC, and on the exact grid bit
// for bit against one rank.
#include <atomic>
#include <cmath>
#include <tuple>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "grid_case.h"
#include "rank_threads.h"
#include "seam/boundary/boundary_errors.h"
#include "seam/boundary/mhc.h"
#include "seam/comm/recording_communicator.h"
#include "seam/core/status.h"
#include "stage_fixture.h"

namespace seam::boundary::testing {
namespace {

using ::testing::HasSubstr;

std::atomic<int> grid_cases{0}, split_cases{0};
class CountReporter : public ::testing::Environment {
 public:
  void TearDown() override {
    std::printf("mhc grid: %d cases ran; mhc pipeline splits: %d cases ran\n", grid_cases.load(), split_cases.load());
  }
};
const auto* const reporter = ::testing::AddGlobalTestEnvironment(new CountReporter);

// ---- An independent reference of MHC over a whole stack, in double. ----
struct RefStage {
  char kind;
  std::vector<float> w_in, w_out, norm;
  MhcCoefficients mhc;
};

std::vector<double> RmsNormRow(const std::vector<double>& x, const std::vector<float>& w, double eps) {
  double ss = 0;
  for (double v : x) ss += v * v;
  const double inv = 1.0 / std::sqrt(ss / x.size() + eps);
  std::vector<double> out(x.size());
  for (size_t i = 0; i < x.size(); ++i) out[i] = x[i] * inv * w[i];
  return out;
}

// One row through the stack: X_i = input; per stage x = norm(Σ pre_i X_i),
// y = W_out · act(W_in · x), X_i ← Σ_j res_ij X_j + post_i y; then the final read.
std::vector<double> ReferenceRow(const std::vector<RefStage>& stages, const MhcCoefficients& final_mhc,
                                 const std::vector<float>& final_norm, double eps, const std::vector<float>& input) {
  const int n = final_mhc.streams;
  const int64_t h = kHidden;
  std::vector<std::vector<double>> X(n, std::vector<double>(input.begin(), input.end()));
  auto mix = [&](const std::vector<float>& pre) {
    std::vector<double> m(h, 0.0);
    for (int i = 0; i < n; ++i)
      for (int64_t k = 0; k < h; ++k) m[k] += pre[i] * X[i][k];
    return m;
  };
  for (const RefStage& st : stages) {
    const std::vector<double> x = RmsNormRow(mix(st.mhc.pre), st.norm, eps);
    const bool ffn = st.kind == 'F';
    const int64_t inner = ffn ? kFfnInner : kAttnInner;
    std::vector<double> hid(inner, 0.0), y(h, 0.0);
    for (int64_t o = 0; o < inner; ++o) {
      for (int64_t i = 0; i < h; ++i) hid[o] += st.w_in[o * h + i] * x[i];
      if (ffn) hid[o] = std::max(hid[o], 0.0);
    }
    for (int64_t o = 0; o < h; ++o)
      for (int64_t i = 0; i < inner; ++i) y[o] += st.w_out[o * inner + i] * hid[i];
    std::vector<std::vector<double>> next(n, std::vector<double>(h, 0.0));
    for (int i = 0; i < n; ++i)
      for (int64_t k = 0; k < h; ++k) {
        for (int j = 0; j < n; ++j) next[i][k] += st.mhc.res[i * n + j] * X[j][k];
        next[i][k] += st.mhc.post[i] * y[k];
      }
    X = next;
  }
  return RmsNormRow(mix(final_mhc.pre), final_norm, eps);
}

TEST(Mhc, StackMatchesAnIndependentFloatReference) {
  for (int streams : {1, 2, 4}) {
    for (const std::string pattern : {"AF", "MF", "AFF"}) {
      StackConfig config{3, ReductionPolicy::kAr, 5, pattern};
      config.exact = false;  // weights / 3: real rounding, compared within a tolerance
      config.mhc_streams = streams;
      const Topology t = *Topology::Make(1, 1, 0);
      auto stack = SyntheticStack::Build(config, t);
      ASSERT_TRUE(stack.ok()) << stack.status();
      SelfComms self;
      const int64_t rows = 5;
      ForwardBatch batch(1, BatchVariant::kOrdinary, t, {rows});
      batch.comms = self.comms();
      const Tensor input = StackInput(3, rows);
      auto out = (*stack)->Forward(batch, input);
      ASSERT_TRUE(out.ok()) << out.status();
      std::vector<RefStage> stages;
      for (size_t l = 0; l < (*stack)->layers().size(); ++l) {
        const auto& layer = (*stack)->layers()[l];
        for (size_t i = 0; i < layer.stages.size(); ++i) {
          const auto& st = layer.stages[i];
          stages.push_back(RefStage{st.kind == 'F' ? 'F' : 'A', st.w_in, st.w_out, st.norm.weight.ToFloats(),
                                    MhcCoefficientsOf(config.seed, l, i, streams)});
        }
      }
      const std::vector<float> in = input.ToFloats(), got = out->ToFloats();
      double worst = 0;
      for (int64_t r = 0; r < rows; ++r) {
        const std::vector<float> row(in.begin() + r * kHidden, in.begin() + (r + 1) * kHidden);
        const std::vector<double> want =
            ReferenceRow(stages, MhcCoefficientsOf(config.seed, -1, 0, streams),
                         (*stack)->final_norm().weight.ToFloats(), (*stack)->final_norm().eps, row);
        for (int64_t k = 0; k < kHidden; ++k) {
          worst = std::max(worst, std::abs(want[k] - got[r * kHidden + k]) / (1.0 + std::abs(want[k])));
        }
      }
      EXPECT_LT(worst, 1e-5) << pattern << " with " << streams << " streams";
    }
  }
}

// ---- The exact grid: MHC stacks on every layout, bit for bit against one rank. ----
using Param = std::tuple<std::pair<int, int>, BatchVariant, ReductionPolicy, std::string, int>;
class MhcGrid : public ::testing::TestWithParam<Param> {};

TEST_P(MhcGrid, DistributedMhcEqualsSingleRankBitForBit) {
  const auto& [layout, variant, policy, pattern, streams] = GetParam();
  if (variant == BatchVariant::kUnpadded && layout.first > 1) GTEST_SKIP() << "UNPADDED: no attention DP";
  for (const std::vector<int64_t>& dp_rows : GridRowPatterns(layout.first)) {
    for (int layers : {1, 2}) {
      GridCase c{layout.first, layout.second, variant, policy, dp_rows, layers};
      c.pattern = pattern;
      c.mhc_streams = streams;
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
  const auto& [layout, variant, policy, pattern, streams] = info.param;
  return GridName(layout, variant, policy) + "_" + pattern + "_n" + std::to_string(streams);
}

INSTANTIATE_TEST_SUITE_P(
    Grid, MhcGrid,
    ::testing::Combine(::testing::Values(std::make_pair(1, 1), std::make_pair(1, 2), std::make_pair(1, 4),
                                         std::make_pair(2, 1), std::make_pair(2, 2)),
                       ::testing::Values(BatchVariant::kOrdinary, BatchVariant::kUnpadded,
                                         BatchVariant::kInputScattered, BatchVariant::kSequenceParallel),
                       ::testing::Values(ReductionPolicy::kAr, ReductionPolicy::kRs, ReductionPolicy::kRsRsv),
                       ::testing::Values(std::string("AF"), std::string("MF"), std::string("NF")),
                       ::testing::Values(2, 3)),
    Name);

// ---- Pipeline: MHC's streams travel written; a split equals no split. ----
std::vector<Tensor> RunPieces(int dp, int attn_tp, BatchVariant variant, ReductionPolicy policy,
                              const std::vector<int64_t>& dp_rows, const std::vector<int>& cuts, const Tensor& all,
                              std::vector<PipelineTensors>* first_handoff) {
  const int tp = dp * attn_tp, layers = cuts.back();
  std::vector<PipelineTensors> handoff(tp);
  std::vector<Tensor> outputs(tp);
  for (size_t piece = 0; piece + 1 < cuts.size(); ++piece) {
    StackConfig config{layers, policy, 13, "AF", cuts[piece], cuts[piece + 1]};
    config.mhc_streams = 3;
    auto registry = std::make_shared<comm::RecordingRegistry>(comm::CommOptions{absl::Seconds(20)});
    auto results = RunRanks(tp, dp, comm::MakeRecordingGroupFactory(registry),
                            [&](const Topology& t, const StageComms& comms) -> absl::Status {
                              SEAM_ASSIGN_OR_RETURN(auto stack, SyntheticStack::Build(config, t));
                              ForwardBatch batch(3, variant, t, dp_rows);
                              batch.comms = comms;
                              const bool first = piece == 0, last = piece + 2 == cuts.size();
                              const Tensor input = RankInput(all, batch.rows, variant);
                              if (first && last) {
                                SEAM_ASSIGN_OR_RETURN(outputs[t.tp_rank], stack->Forward(batch, input));
                              } else if (first) {
                                SEAM_ASSIGN_OR_RETURN(handoff[t.tp_rank], stack->ForwardToPp(batch, input));
                              } else if (last) {
                                SEAM_ASSIGN_OR_RETURN(outputs[t.tp_rank], stack->ForwardFromPp(batch, handoff[t.tp_rank]));
                              } else {
                                SEAM_ASSIGN_OR_RETURN(handoff[t.tp_rank], stack->ForwardBetween(batch, handoff[t.tp_rank]));
                              }
                              return absl::OkStatus();
                            });
    for (int r = 0; r < tp; ++r) SEAM_CHECK_MSG(results[r].ok(), "piece ", piece, " rank ", r, ": ", results[r].ToString());
    if (piece == 0 && first_handoff != nullptr) *first_handoff = handoff;
  }
  return outputs;
}

using SplitParam = std::tuple<std::pair<int, int>, BatchVariant, ReductionPolicy>;
class MhcSplit : public ::testing::TestWithParam<SplitParam> {};

TEST_P(MhcSplit, ExpandedStreamsTravelWrittenAndASplitEqualsNoSplit) {
  const auto& [layout, variant, policy] = GetParam();
  if (variant == BatchVariant::kUnpadded && layout.first > 1) GTEST_SKIP() << "UNPADDED: no attention DP";
  for (const std::vector<int64_t>& dp_rows : GridRowPatterns(layout.first)) {
    int64_t total = 0;
    for (int64_t r : dp_rows) total += r;
    const Tensor all = StackInput(5, total);
    const auto whole = RunPieces(layout.first, layout.second, variant, policy, dp_rows, {0, 3}, all, nullptr);
    for (const std::vector<int>& cuts : {std::vector<int>{0, 1, 3}, std::vector<int>{0, 1, 2, 3}}) {
      std::vector<PipelineTensors> sent;
      const auto split = RunPieces(layout.first, layout.second, variant, policy, dp_rows, cuts, all, &sent);
      for (const PipelineTensors& p : sent) {
        ASSERT_EQ(p.state, StreamState::kWritten);
        ASSERT_FALSE(p.residual.defined());
        ASSERT_EQ(p.hidden.dim(1), 3 * kHidden);  // the expanded streams, not one hidden row
      }
      for (size_t r = 0; r < whole.size(); ++r) ASSERT_TRUE(BitEqual(split[r], whole[r])) << "rank " << r;
      ++split_cases;
    }
  }
}

std::string SplitName(const ::testing::TestParamInfo<SplitParam>& info) {
  return GridName(std::get<0>(info.param), std::get<1>(info.param), std::get<2>(info.param));
}

INSTANTIATE_TEST_SUITE_P(
    Splits, MhcSplit,
    ::testing::Combine(::testing::Values(std::make_pair(1, 1), std::make_pair(1, 2), std::make_pair(2, 1),
                                         std::make_pair(2, 2)),
                       ::testing::Values(BatchVariant::kOrdinary, BatchVariant::kUnpadded,
                                         BatchVariant::kInputScattered, BatchVariant::kSequenceParallel),
                       ::testing::Values(ReductionPolicy::kAr, ReductionPolicy::kRsRsv)),
    SplitName);

// ---- Plans and contracts. ----
std::unique_ptr<SyntheticStack> MhcStack(const Topology& t, ReductionPolicy policy, const std::string& pattern) {
  StackConfig config{2, policy, 3, pattern};
  config.mhc_streams = 2;
  auto stack = SyntheticStack::Build(config, t);
  SEAM_CHECK_OK(stack.status());
  return std::move(*stack);
}

TEST(Mhc, ANonlinearUpdateNeverMovesBeforeTheReductionNorFusesIntoAddNorm) {
  const Topology t = *Topology::Make(4, 2, 1);
  auto stack = MhcStack(t, ReductionPolicy::kRsRsv, "AF");
  int scatter_exits = 0;
  for (const auto& layer : stack->layers()) {
    for (const auto& st : layer.stages) {
      for (const VariantPaths& vp : st.boundary->plan().variants) {
        for (const EntryPath& e : vp.entries) {
          for (const Step& s : e.steps) {
            EXPECT_NE(s.op, StepOp::kFusedInput) << e.incoming.ToString();
            EXPECT_NE(s.op, StepOp::kAddBeforeSum);
          }
        }
        for (const ExitOption& o : vp.exit.options) {
          for (const Step& s : o.steps) {
            EXPECT_NE(s.op, StepOp::kAddBeforeSum) << ExitChoiceName(o.choice);
            EXPECT_NE(s.op, StepOp::kWriteResidual) << ExitChoiceName(o.choice);
          }
          if (o.choice == ExitChoice::kReduceScatterV || o.choice == ExitChoice::kReduceScatterFixed) {
            ++scatter_exits;  // the sum completes on the slice; the update waits for the next input
            EXPECT_EQ(o.leaves.state, StreamState::kPending);
            EXPECT_EQ(o.leaves.owed, SumGroup::kNone);
          }
        }
      }
    }
  }
  EXPECT_GT(scatter_exits, 0);
  // A plain stack on the same topology does fuse and add before the sum.
  StackConfig plain{2, ReductionPolicy::kRsRsv, 3, "AF"};
  auto p = *SyntheticStack::Build(plain, t);
  bool fused = false;
  for (const EntryPath& e : p->layers()[0].stages[1].boundary->plan().Find(BatchVariant::kOrdinary)->entries) {
    for (const Step& s : e.steps) fused |= s.op == StepOp::kFusedInput;
  }
  EXPECT_TRUE(fused);
}

// A read that records the update it was handed with the read.
class RecordingRead final : public ResidualReadout {
 public:
  explicit RecordingRead(const NormParams* norm) : inner_(norm) {}
  std::string name() const override { return "recording_read"; }
  ReadoutCaps caps() const override { return ReadoutCaps{}; }
  absl::Status Read(const Tensor& r, const Tensor& out) const override { return inner_.Read(r, out); }
  absl::Status UpdateAndRead(const ResidualUpdate& update, const Tensor& c, const Tensor& r,
                             const Tensor& out) const override {
    seen.push_back(update.name());
    return inner_.UpdateAndRead(update, c, r, out);
  }
  mutable std::vector<std::string> seen;

 private:
  AddRmsNormRead inner_;
};

class DoublingUpdate final : public ResidualUpdate {
 public:
  UpdateCaps caps() const override { return UpdateCaps{false, false}; }
  std::string name() const override { return "doubling"; }
  absl::Status Apply(const Tensor& c, const Tensor& r) const override {  // r ← 2r + c
    std::vector<float> rv = r.ToFloats(), cv = c.ToFloats();
    for (size_t i = 0; i < rv.size(); ++i) rv[i] = 2 * rv[i] + cv[i];
    return CopyInto(Tensor::FromFloats(rv, r.shape()), r);
  }
};

TEST(Mhc, UpdateAndReadReceivesTheProducersUpdate) {
  const Topology t = *Topology::Make(1, 1, 0);
  NormParams norm = UnitNorm();
  auto read = std::make_shared<RecordingRead>(&norm);
  StageDeclaration attn = DeclareAttn();
  attn.update = std::make_shared<DoublingUpdate>();
  LayerStack stack(LayerStackOptions{t, ReductionPolicy::kAr});
  auto b = SEAM_APPEND_STAGES(0, StageItem{attn, &norm}, StageItem{DeclareFfn(), &norm, {}, read});
  ASSERT_TRUE(b.ok()) << b.status();
  ASSERT_TRUE(stack.Close().ok());
  SelfComms self;
  ForwardBatch batch(1, BatchVariant::kOrdinary, t, {3});
  batch.comms = self.comms();
  const Tensor input = Rows(4, 3), attn_out = Rows(5, 3);
  Hidden h = *Start(batch, input);
  ASSERT_TRUE((*b)[0]->Prepare(h, batch).ok());
  h = *(*b)[0]->Finish(attn_out, batch);
  ASSERT_TRUE((*b)[1]->Prepare(h, batch).ok());
  EXPECT_THAT(read->seen, ::testing::ElementsAre("doubling"));
  // The update ran as itself, not as a plain add: r = 2 · input + attn_out.
  std::vector<float> want = input.ToFloats(), c = attn_out.ToFloats();
  for (size_t i = 0; i < want.size(); ++i) want[i] = 2 * want[i] + c[i];
  EXPECT_TRUE(BitEqual(batch.stream->residual(), Tensor::FromFloats(want, {3, kHidden})));
}

// The expanded residual after one MHC update of `out` on stack input `input` (by hand).
Tensor UpdatedStreams(const Tensor& input, const Tensor& out, const MhcCoefficients& c) {
  const int n = c.streams;
  const std::vector<float> x = input.ToFloats(), y = out.ToFloats();
  std::vector<float> r(input.rows() * n * kHidden);
  for (int64_t row = 0; row < input.rows(); ++row)
    for (int i = 0; i < n; ++i)
      for (int64_t k = 0; k < kHidden; ++k) {
        float acc = 0;
        for (int j = 0; j < n; ++j) acc += c.res[i * n + j] * x[row * kHidden + k];
        r[(row * n + i) * kHidden + k] = acc + c.post[i] * y[row * kHidden + k];
      }
  return Tensor::FromFloats(r, {input.rows(), n * kHidden});
}

TEST(Mhc, FoldAndToPpApplyTheUpdateWhileSnapshotRefusesIt) {
  const Topology t = *Topology::Make(1, 1, 0);
  auto stack = MhcStack(t, ReductionPolicy::kAr, "AF");
  const StageBoundary& attn = *stack->layers()[0].stages[0].boundary;
  SelfComms self;
  const Tensor input = Rows(6, 3), out = Rows(7, 3);
  const Tensor want = UpdatedStreams(input, out, MhcCoefficientsOf(3, 0, 0, 2));
  for (bool to_pp : {false, true}) {
    ForwardBatch batch(1, BatchVariant::kOrdinary, t, {3});
    batch.comms = self.comms();
    Hidden h = *Start(batch, input);
    auto x = const_cast<StageBoundary&>(attn).Prepare(h, batch);
    ASSERT_TRUE(x.ok()) << x.status();
    EXPECT_EQ(x->dim(1), kHidden);  // the read collapses the streams
    EXPECT_EQ(batch.stream->residual().dim(1), 2 * kHidden);
    h = *const_cast<StageBoundary&>(attn).Finish(out, batch);
    auto snap = Snapshot(batch);
    EXPECT_EQ(snap.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_EQ(snap.status().message(), "snapshot requires a plain residual update (the pending update is mhc_post)");
    if (to_pp) {
      auto sent = ToPp(h, batch);
      ASSERT_TRUE(sent.ok()) << sent.status();
      EXPECT_EQ(sent->state, StreamState::kWritten);
      EXPECT_TRUE(BitEqual(sent->hidden, want));
    } else {
      auto folded = Fold(h, batch);
      ASSERT_TRUE(folded.ok()) << folded.status();
      auto taken = TakeOutput(*folded, batch);
      ASSERT_TRUE(taken.ok()) << taken.status();
      EXPECT_TRUE(BitEqual(*taken, want));
    }
  }
}

TEST(Mhc, AReadWhoseCapabilitiesDifferFromTheDeclarationIsRefused) {
  const Topology t = *Topology::Make(1, 1, 0);
  NormParams norm = UnitNorm();
  auto read = *MhcRead::Make(MhcCoefficientsOf(1, 0, 0, 2), &norm);
  LayerStack stack(LayerStackOptions{t, ReductionPolicy::kAr});
  auto b = SEAM_APPEND_STAGES(0, StageItem{DeclareAttn(), &norm, {}, read});
  EXPECT_EQ(b.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(b.status().message()),
              HasSubstr("the mhc_pre_rmsnorm read's capabilities differ from the declaration's readout_caps"));
}

TEST(Mhc, CoefficientsOfTheWrongSizeAreRefused) {
  MhcCoefficients c{2, {1, 1}, {1}, {1, 0, 0, 1}};
  EXPECT_EQ(MhcUpdate::Make(c).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(MhcUpdate::Make(c).status().message(),
            "MHC coefficients of 2 streams need pre[2], post[2] and res[4]; got 2, 1, 4");
}

}  // namespace
}  // namespace seam::boundary::testing
