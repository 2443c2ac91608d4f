// Pipeline ranks of different TP sizes: the sender exports one slice per
// attention-TP rank, ResliceHandoff routes them to the receiver's ranks, and
// the receiver gathers them back where its first stage needs the DP rows.
// Exact weights: every split equals the single-rank run bit for bit. Also the
// receiving side's contract: the stream state comes from the producer's
// declaration, never from the handoff header.
#include <atomic>
#include <memory>
#include <tuple>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "grid_case.h"
#include "rank_threads.h"
#include "seam/comm/recording_communicator.h"
#include "seam/comm/self_communicator.h"
#include "seam/core/status.h"
#include "stage_fixture.h"
#include "synthetic_stack.h"

namespace seam::boundary::testing {
namespace {

using ::testing::HasSubstr;

constexpr int kLayers = 4;
std::atomic<int> cases_run{0};
class CountReporter : public ::testing::Environment {
 public:
  void TearDown() override { std::printf("pipeline TP-change grid: %d cases ran\n", cases_run.load()); }
};
const auto* const reporter = ::testing::AddGlobalTestEnvironment(new CountReporter);

struct Side {
  int dp, attn_tp;
  std::vector<int64_t> dp_rows;
};

// Layers [0, cut) on `a`, [cut, kLayers) on `b`; OK when every rank of `b`
// equals its rows of the single-rank run.
absl::Status RunSplit(const Side& a, const Side& b, int cut, BatchVariant variant, ReductionPolicy policy,
                      const std::string& pattern) {
  int64_t total = 0;
  for (int64_t r : a.dp_rows) total += r;
  const Tensor all = StackInput(17, total);
  const StackConfig whole{kLayers, policy, 13, pattern};
  SEAM_ASSIGN_OR_RETURN(Topology one, Topology::Make(1, 1, 0));
  SEAM_ASSIGN_OR_RETURN(auto ref_stack, SyntheticStack::Build(whole, one));
  auto self = comm::MakeSelfCommunicator("tp");
  ForwardBatch ref_batch(1, BatchVariant::kOrdinary, one, {total});
  ref_batch.comms = StageComms{self.get(), self.get(), self.get()};
  SEAM_ASSIGN_OR_RETURN(const Tensor expected, ref_stack->Forward(ref_batch, all));

  const int tp_a = a.dp * a.attn_tp, tp_b = b.dp * b.attn_tp;
  std::vector<PipelineTensors> sent(tp_a);
  StackConfig first = whole, second = whole;
  first.end_layer = cut;
  second.first_layer = cut;
  auto reg_a = std::make_shared<comm::RecordingRegistry>(comm::CommOptions{absl::Seconds(20)});
  auto ra = RunRanks(tp_a, a.dp, comm::MakeRecordingGroupFactory(reg_a),
                     [&](const Topology& t, const StageComms& comms) -> absl::Status {
                       SEAM_ASSIGN_OR_RETURN(auto stack, SyntheticStack::Build(first, t));
                       ForwardBatch batch(2, variant, t, a.dp_rows);
                       batch.comms = comms;
                       SEAM_ASSIGN_OR_RETURN(sent[t.tp_rank],
                                             stack->ForwardToPp(batch, RankInput(all, batch.rows, variant)));
                       return absl::OkStatus();
                     });
  for (int r = 0; r < tp_a; ++r) SEAM_RETURN_IF_ERROR(Annotate(ra[r], absl::StrCat("sender rank ", r)));
  SEAM_ASSIGN_OR_RETURN(Topology ta, Topology::Make(tp_a, a.dp, 0));
  SEAM_ASSIGN_OR_RETURN(Topology tb, Topology::Make(tp_b, b.dp, 0));
  SEAM_ASSIGN_OR_RETURN(std::vector<PipelineTensors> received,
                        ResliceHandoff(sent, ta, a.dp_rows, tb, b.dp_rows, variant));
  auto reg_b = std::make_shared<comm::RecordingRegistry>(comm::CommOptions{absl::Seconds(20)});
  auto rb = RunRanks(tp_b, b.dp, comm::MakeRecordingGroupFactory(reg_b),
                     [&](const Topology& t, const StageComms& comms) -> absl::Status {
                       SEAM_ASSIGN_OR_RETURN(auto stack, SyntheticStack::Build(second, t));
                       ForwardBatch batch(2, variant, t, b.dp_rows);
                       batch.comms = comms;
                       SEAM_ASSIGN_OR_RETURN(Tensor out, stack->ForwardFromPp(batch, received[t.tp_rank]));
                       int64_t offset = 0;
                       for (int d = 0; d < t.dp_rank(); ++d) offset += b.dp_rows[d];
                       if (!BitEqual(out, expected.Rows(offset, b.dp_rows[t.dp_rank()]).Clone())) {
                         return absl::InternalError("output differs from the single-rank reference");
                       }
                       return absl::OkStatus();
                     });
  for (int r = 0; r < tp_b; ++r) SEAM_RETURN_IF_ERROR(Annotate(rb[r], absl::StrCat("receiver rank ", r)));
  SEAM_RETURN_IF_ERROR(reg_a->ExpectSameSequenceInEveryGroup());
  return reg_b->ExpectSameSequenceInEveryGroup();
}

using Param = std::tuple<std::pair<int, int>, BatchVariant, ReductionPolicy, std::string>;
class PipelineTpChange : public ::testing::TestWithParam<Param> {};

// (sender TP, receiver TP) = (2, 4), (4, 2), (1, 2), (2, 1), attention TP only;
// plus attention-DP sides (dp 2 × attn_tp 1 → dp 2 × attn_tp 2).
TEST_P(PipelineTpChange, SplitAcrossTpSizesEqualsSingleRankBitForBit) {
  const auto& [sizes, variant, policy, pattern] = GetParam();
  const bool dp_sides = sizes.first == 0;
  for (int cut : {1, 2, 3}) {
    for (const std::vector<int64_t>& rows : dp_sides ? GridRowPatterns(2) : GridRowPatterns(1)) {
      Side a{1, sizes.first, rows}, b{1, sizes.second, rows};
      if (dp_sides) {
        if (variant == BatchVariant::kUnpadded) GTEST_SKIP() << "UNPADDED: no attention DP";
        a = Side{2, 1, rows};
        b = Side{2, 2, rows};
      }
      const absl::Status s = RunSplit(a, b, cut, variant, policy, pattern);
      ASSERT_TRUE(s.ok()) << "cut " << cut << " rows " << ::testing::PrintToString(rows) << ": " << s;
      ++cases_run;
    }
  }
}

std::string Name(const ::testing::TestParamInfo<Param>& info) {
  const auto& [sizes, variant, policy, pattern] = info.param;
  std::string p = ReductionPolicyName(policy);
  for (char& ch : p) ch = ch == '+' ? '_' : ch;
  return absl::StrCat("tp", sizes.first, "_to_tp", sizes.second, "_", BatchVariantName(variant), "_", p, "_",
                      pattern);
}

INSTANTIATE_TEST_SUITE_P(
    Sizes, PipelineTpChange,
    ::testing::Combine(::testing::Values(std::make_pair(2, 4), std::make_pair(4, 2), std::make_pair(1, 2),
                                         std::make_pair(2, 1), std::make_pair(0, 0)),
                       ::testing::Values(BatchVariant::kOrdinary, BatchVariant::kUnpadded,
                                         BatchVariant::kInputScattered, BatchVariant::kSequenceParallel),
                       ::testing::Values(ReductionPolicy::kAr, ReductionPolicy::kRsRsv),
                       ::testing::Values(std::string("AF"), std::string("MF"))),
    Name);

// The receiver of a pending handoff (an attention producer) reads the
// residual although the header says written, and refuses one without it.
TEST(PipelineHandoff, StateComesFromTheProducersDeclarationNotTheHeader) {
  auto t = *Topology::Make(1, 1, 0);
  SelfComms self;
  auto facts = [](int) { return std::vector<StageDeclaration>{DeclareAttn(), DeclareFfn()}; };
  LayerStackOptions options{t, ReductionPolicy::kAr, facts, 1, 2, 2};
  LayerStack stack(options);
  NormParams norm = UnitNorm();
  auto b = SEAM_APPEND_STAGES(1, StageItem{DeclareAttn(), &norm}, StageItem{DeclareFfn(), &norm});
  ASSERT_TRUE(b.ok()) << b.status();
  ASSERT_TRUE(stack.Close().ok());
  EXPECT_EQ(PipelineHandoffState((*b)[0]->plan().producer.declaration, BatchVariant::kOrdinary,
                                 ReductionPolicy::kAr),
            StreamState::kPending);
  ForwardBatch batch(1, BatchVariant::kOrdinary, t, {4});
  batch.comms = self.comms();
  PipelineTensors in;
  in.state = StreamState::kWritten;  // a stale header
  in.rows = RowForm::kAttnTpSlice;
  in.hidden = Rows(1, 4);
  auto refused = FromPp(in, batch, *(*b)[0]);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("hands over a pending stream"));
  in.residual = Rows(2, 4);
  auto h = FromPp(in, batch, *(*b)[0]);
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(batch.stream->state(), StreamState::kPending);
}

TEST(PipelineHandoff, ResliceRefusesSlicesThatDoNotCoverTheBatch) {
  auto a = *Topology::Make(2, 1, 0);
  auto b = *Topology::Make(4, 1, 0);
  std::vector<PipelineTensors> sent(2);
  for (auto& s : sent) s.hidden = Rows(3, 3);
  auto bad = ResliceHandoff(sent, a, {6}, b, {7}, BatchVariant::kOrdinary);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("the sender's batch has 6 rows, the receiver's 7"));
}

}  // namespace
}  // namespace seam::boundary::testing
