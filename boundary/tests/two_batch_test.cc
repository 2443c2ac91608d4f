// The contracts of two-batch overlap: what a split, the operation-scheduled
// driver and CompleteNow refuse, and what CompleteNow leaves behind.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "grid_case.h"
#include "rank_threads.h"
#include "seam/boundary/operation_schedule.h"
#include "seam/boundary/two_batch.h"
#include "seam/comm/process_groups.h"
#include "seam/comm/recording_communicator.h"
#include "seam/comm/self_communicator.h"
#include "seam/core/status.h"
#include "synthetic_stack.h"

namespace seam::boundary::testing {
namespace {

using ::testing::HasSubstr;

// One rank (TP 1) with a stack of `pattern` and a started batch of `rows`.
struct OneRank {
  explicit OneRank(const std::string& pattern, int64_t rows = 5, bool transform = false) {
    StackConfig config{1, ReductionPolicy::kAr, 3, pattern};
    config.output_transform = transform;
    topology = *Topology::Make(1, 1, 0);
    stack = *SyntheticStack::Build(config, topology);
    batch = std::make_unique<ForwardBatch>(1, BatchVariant::kOrdinary, topology, std::vector<int64_t>{rows});
    batch->comms = StageComms{self.get(), self.get(), self.get()};
    hidden = *Start(*batch, StackInput(11, rows));
  }
  StageBoundary& stage(int i) const { return *stack->layers()[0].stages[i].boundary; }
  Topology topology;
  std::unique_ptr<comm::Communicator> self = comm::MakeSelfCommunicator("tp");
  std::unique_ptr<SyntheticStack> stack;
  std::unique_ptr<ForwardBatch> batch;
  Hidden hidden;
};

TEST(TboSchedule, Orders) {
  auto text = [](TboOrder order) {
    std::string s;
    for (const ScheduledOp& op : MakeTboSchedule(order, 3)) s += (op.microbatch == 0 ? "A" : "B") + std::to_string(op.op) + " ";
    return s;
  };
  EXPECT_EQ(text(TboOrder::kAlternate), "A0 B0 A1 B1 A2 B2 ");
  EXPECT_EQ(text(TboOrder::kAlternateBFirst), "B0 A0 B1 A1 B2 A2 ");
  EXPECT_EQ(text(TboOrder::kStaggered), "A0 A1 B0 A2 B1 B2 ");
  EXPECT_EQ(text(TboOrder::kSequential), "A0 A1 A2 B0 B1 B2 ");
  for (TboOrder o : {TboOrder::kAlternate, TboOrder::kAlternateBFirst, TboOrder::kStaggered, TboOrder::kSequential}) {
    EXPECT_TRUE(CheckSchedule(MakeTboSchedule(o, 3), 3).ok()) << TboOrderName(o);
  }
}

TEST(TboSchedule, RefusesOutOfOrderOrMissingOperations) {
  const absl::Status swapped = CheckSchedule({{0, 1}, {0, 0}, {1, 0}, {1, 1}}, 2);
  EXPECT_EQ(swapped.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(swapped.message()), HasSubstr("runs operation 1 of microbatch A; its next one is 0"));
  EXPECT_EQ(CheckSchedule({{0, 0}, {1, 0}}, 2).code(), absl::StatusCode::kInvalidArgument);
}

TEST(TboSplit, RefusesRowsThatDoNotFit) {
  OneRank r("AF", 5);
  const auto bad = SplitMicrobatches(r.hidden, *r.batch, TwoBatchSplit{{6}}, nullptr);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("microbatch A takes [6] rows of [5]"));
  EXPECT_EQ(SplitMicrobatches(r.hidden, *r.batch, TwoBatchSplit{{1, 2}}, nullptr).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(TboSplit, MicrobatchesNeverShareAStream) {
  OneRank r("AF", 5);
  auto pair = SplitMicrobatches(r.hidden, *r.batch, TwoBatchSplit{{2}}, nullptr);
  ASSERT_TRUE(pair.ok()) << pair.status();
  EXPECT_EQ(r.batch->stream, nullptr);  // the parent's stream is released
  EXPECT_NE(pair->a.stream.get(), pair->b.stream.get());
  EXPECT_EQ(pair->a.rows.my_dp_rows(), 2);
  EXPECT_EQ(pair->b.rows.my_dp_rows(), 3);
  EXPECT_TRUE(pair->a.operation_scheduled && pair->b.operation_scheduled);
  // A's value passed to B's boundary is refused (the stream identity check).
  const auto crossed = r.stage(0).Prepare(pair->a_hidden, pair->b);
  EXPECT_EQ(crossed.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(crossed.status().message()), HasSubstr("output does not belong to this residual stream"));
}

TEST(TboSplit, OperationScheduledFfnRefusesFinishAndExit) {
  OneRank r("AF", 4);
  auto pair = *SplitMicrobatches(r.hidden, *r.batch, TwoBatchSplit{{2}}, nullptr);
  auto& stages = r.stack->layers()[0].stages;
  Hidden h = *r.stack->RunStage(stages[0], pair.a, pair.a_hidden);
  const Tensor x = *stages[1].boundary->Prepare(h, pair.a);
  const auto finish = stages[1].boundary->Finish(x, pair.a);
  EXPECT_EQ(finish.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(finish.status().message()), HasSubstr("its sum completes with CompleteNow"));
  EXPECT_EQ(stages[1].boundary->Exit(pair.a).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(stages[1].boundary->CompleteNow(x, pair.a).ok());
}

TEST(TboSplit, AnExitScopeMayNotBeHeldAcrossAYieldPoint) {
  OneRank r("AF", 4);
  auto& stages = r.stack->layers()[0].stages;
  Hidden h = *r.stack->RunStage(stages[0], *r.batch, r.hidden);
  ASSERT_TRUE(stages[1].boundary->Prepare(h, *r.batch).ok());
  {
    auto scope = stages[1].boundary->Exit(*r.batch);
    ASSERT_TRUE(scope.ok());
    const absl::Status yield = CheckYieldPoint(*r.batch);
    EXPECT_EQ(yield.code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(std::string(yield.message()), HasSubstr("with an exit scope open"));
    EXPECT_EQ(r.batch->open_exit_scopes, 1);
  }
  EXPECT_EQ(r.batch->open_exit_scopes, 0);
  EXPECT_TRUE(CheckYieldPoint(*r.batch).ok());
}

TEST(TboDriver, RefusesMicrobatchesThatAreNotOperationScheduled) {
  OneRank r("AF", 4);
  auto pair = *SplitMicrobatches(r.hidden, *r.batch, TwoBatchSplit{{2}}, nullptr);
  pair.b.operation_scheduled = false;
  const absl::Status st = RunOperationSchedule(MakeTboSchedule(TboOrder::kAlternate, 1), 1, pair,
                                               [](int, int, ForwardBatch&, Hidden&) { return absl::OkStatus(); });
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(st.message()), HasSubstr("is not operation-scheduled"));
}

TEST(TboMerge, RefusesMicrobatchesAtDifferentStages) {
  OneRank r("AF", 4);
  auto pair = *SplitMicrobatches(r.hidden, *r.batch, TwoBatchSplit{{2}}, nullptr);
  pair.a_hidden = *r.stack->RunStage(r.stack->layers()[0].stages[0], pair.a, pair.a_hidden);
  pair.b_hidden = *r.stack->RunStage(r.stack->layers()[0].stages[0], pair.b, pair.b_hidden);
  pair.a_hidden = *r.stack->RunStage(r.stack->layers()[0].stages[1], pair.a, pair.a_hidden);
  const auto merged = MergeMicrobatches(pair, *r.batch);
  EXPECT_EQ(merged.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(merged.status().message()), HasSubstr("left different stages"));
}

TEST(TboMerge, RowsAreAsThenBs) {
  const Tensor a = Tensor::FromFloats({1, 2, 3, 4}, {2, 2}), b = Tensor::FromFloats({5, 6}, {1, 2});
  const Tensor m = *MergeRows(a, b);
  EXPECT_EQ(m.ToFloats(), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(MergeRows(a, Tensor::FromFloats({1, 2, 3}, {1, 3})).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(CompleteNow, RefusesAnAlwaysPartialAttention) {
  OneRank r("AF", 4);
  const Tensor x = *r.stage(0).Prepare(r.hidden, *r.batch);
  const auto st = r.stack->layers()[0].stages[0].boundary->CompleteNow(x, *r.batch);
  EXPECT_EQ(st.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(st.status().message()), HasSubstr("has no exit that completes its sum now"));
}

// At TP 2 (attention DP 2): the sum completes, the output lands on this DP
// group's rows (a local narrow of the FFN rows), the transform is applied and
// only the plain update stays pending.
TEST(CompleteNow, CompletesAppliesTheTransformAndLeavesNothingOwed) {
  auto registry = std::make_shared<comm::RecordingRegistry>(comm::CommOptions{absl::Seconds(20)});
  StackConfig config{1, ReductionPolicy::kAr, 3, "AF"};
  config.output_transform = true;
  const std::vector<int64_t> rows = {3, 2};
  auto results = RunRanks(2, 2, comm::MakeRecordingGroupFactory(registry),
                          [&](const Topology& t, const StageComms& comms) -> absl::Status {
                            SEAM_ASSIGN_OR_RETURN(auto stack, SyntheticStack::Build(config, t));
                            ForwardBatch batch(1, BatchVariant::kOrdinary, t, rows);
                            batch.comms = comms;
                            batch.operation_scheduled = true;
                            const Tensor input = RankInput(StackInput(4, 5), batch.rows, batch.variant);
                            SEAM_ASSIGN_OR_RETURN(Hidden h, Start(batch, input));
                            SEAM_ASSIGN_OR_RETURN(h, stack->RunStage(stack->layers()[0].stages[0], batch, h));
                            SEAM_ASSIGN_OR_RETURN(h, stack->RunStage(stack->layers()[0].stages[1], batch, h));
                            const Contribution* c = batch.stream->pending();
                            if (h.owes_sum() || c == nullptr || c->owed != SumGroup::kNone) {
                              return absl::InternalError("CompleteNow left a sum owed");
                            }
                            if (c->rows != RowForm::kDpRows || c->value.rows() != rows[t.dp_rank()]) {
                              return absl::InternalError("CompleteNow left the output off the layer's exit rows");
                            }
                            if (!c->update->caps().plain_add) {
                              return absl::InternalError("CompleteNow left the output transform to the next input");
                            }
                            for (float v : c->value.ToFloats()) {
                              if (v < 0) return absl::InternalError("the transform (max(y, 0) / 2) was not applied");
                            }
                            return absl::OkStatus();
                          });
  for (const absl::Status& s : results) EXPECT_TRUE(s.ok()) << s;
  EXPECT_EQ(CountCollectives(*registry, comm::CollectiveKind::kAllReduce), 2);  // the FFN's sum, on both ranks
}

}  // namespace
}  // namespace seam::boundary::testing
