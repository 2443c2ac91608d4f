// The stream accessors of stream_ops.h: CompleteOutput completes the sum and
// leaves the update pending, AddToOutput adds its extra exactly once, and
// SetWritten replaces the stream with a written residual.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "rank_threads.h"
#include "seam/comm/recording_communicator.h"
#include "seam/core/status.h"
#include "seam/kernels/ops.h"
#include "stage_fixture.h"

namespace seam::boundary::testing {
namespace {

using ::testing::HasSubstr;

// Runs the one-layer forward with `hooks` on dp=1, tp=2 over the recording fake;
// every rank's output must equal `expected`.
void ExpectTp2Equals(const Tensor& input, const LayerHooks& hooks, const Tensor& expected) {
  auto registry = std::make_shared<comm::RecordingRegistry>(comm::CommOptions{absl::Seconds(5)});
  auto results = RunRanks(2, 1, comm::MakeRecordingGroupFactory(registry),
                          [&](const Topology& t, const StageComms& comms) -> absl::Status {
                            SEAM_ASSIGN_OR_RETURN(auto layer, BuildOneLayer(t));
                            ForwardBatch batch(1, BatchVariant::kOrdinary, t, {input.rows()});
                            batch.comms = comms;
                            SEAM_ASSIGN_OR_RETURN(Tensor out, RunLayer(*layer, batch, input, hooks));
                            if (!BitEqual(out, expected)) return absl::InternalError("output differs");
                            return absl::OkStatus();
                          });
  for (int r = 0; r < 2; ++r) EXPECT_TRUE(results[r].ok()) << "rank " << r << ": " << results[r];
  EXPECT_TRUE(registry->ExpectSameSequenceInEveryGroup().ok()) << registry->ExpectSameSequenceInEveryGroup();
}

TEST(StreamOps, CompleteOutputCompletesTheSumAndLeavesTheUpdatePending) {
  const Tensor input = Rows(41, 5);
  auto expected = RunSingleRank(input);
  ASSERT_TRUE(expected.ok()) << expected.status();
  LayerHooks hooks;
  hooks.after_attn = [&](Hidden h, ForwardBatch& batch) -> absl::StatusOr<Hidden> {
    SEAM_ASSIGN_OR_RETURN(Hidden complete, CompleteOutput(h, batch));
    EXPECT_FALSE(complete.owes_sum());
    SEAM_ASSIGN_OR_RETURN(Tensor value, complete.tensor());
    EXPECT_EQ(value.rows(), 5);
    EXPECT_EQ(batch.stream->state(), StreamState::kPending);
    EXPECT_EQ(batch.stream->pending()->owed, SumGroup::kNone);
    return complete;
  };
  ExpectTp2Equals(input, hooks, *expected);
}

TEST(StreamOps, CompleteOutputOnCompletedValueIssuesTheSameValue) {
  auto t = *Topology::Make(1, 1, 0);
  auto layer = *BuildOneLayer(t);
  SelfComms self;
  ForwardBatch batch(1, BatchVariant::kOrdinary, t, {3});
  batch.comms = self.comms();
  const Tensor attn_out = Rows(42, 3);
  Hidden h = *Start(batch, Rows(43, 3));
  ASSERT_TRUE(layer->attn->Prepare(h, batch).ok());
  h = *layer->attn->Finish(attn_out, batch);
  auto complete = CompleteOutput(h, batch);
  ASSERT_TRUE(complete.ok()) << complete.status();
  EXPECT_TRUE(BitEqual(*complete->tensor(), attn_out));
  auto stale = CompleteOutput(h, batch);
  EXPECT_EQ(stale.status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(StreamOps, AddToOutputAddsTheExtraExactlyOnce) {
  const Tensor input = Rows(44, 6), extra = Rows(45, 6);
  // Reference: one rank whose attention output already includes the extra (one fp32 add).
  LayerHooks with_extra;
  with_extra.attn_compute = [&](const Tensor& x) {
    Tensor y = PartialOutput(x, 1);
    SEAM_CHECK_OK(kernels::AddInPlace(y, extra));
    return y;
  };
  auto expected = RunSingleRank(input, with_extra);
  ASSERT_TRUE(expected.ok()) << expected.status();
  auto without = RunSingleRank(input);
  ASSERT_TRUE(without.ok());
  ASSERT_FALSE(BitEqual(*expected, *without)) << "the extra must change the output";
  LayerHooks hooks;
  hooks.after_attn = [&](Hidden h, ForwardBatch& batch) -> absl::StatusOr<Hidden> {
    SEAM_ASSIGN_OR_RETURN(Hidden added, AddToOutput(h, batch, extra));
    EXPECT_FALSE(added.owes_sum());
    EXPECT_EQ(batch.stream->state(), StreamState::kPending);
    return added;
  };
  ExpectTp2Equals(input, hooks, *expected);
}

TEST(StreamOps, AddToOutputOnWrittenStreamIsRefused) {
  auto t = *Topology::Make(1, 1, 0);
  auto layer = *BuildOneLayer(t);
  SelfComms self;
  ForwardBatch batch(1, BatchVariant::kOrdinary, t, {3});
  batch.comms = self.comms();
  Hidden h = *Start(batch, Rows(46, 3));
  h = *SetWritten(h, batch, Rows(47, 3));
  auto added = AddToOutput(h, batch, Rows(48, 3));
  EXPECT_EQ(added.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(added.status().message(), "add_to_output needs a pending contribution; the stream is written");
}

TEST(StreamOps, SetWrittenReplacesTheResidualAndDropsThePendingContribution) {
  auto t = *Topology::Make(1, 1, 0);
  auto layer = *BuildOneLayer(t);
  SelfComms self;
  ForwardBatch batch(1, BatchVariant::kOrdinary, t, {4});
  batch.comms = self.comms();
  Hidden h = *Start(batch, Rows(49, 4));
  ASSERT_TRUE(layer->attn->Prepare(h, batch).ok());
  h = *layer->attn->Finish(Rows(50, 4), batch);
  auto wrong = SetWritten(h, batch, Rows(51, 3));
  EXPECT_EQ(wrong.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(wrong.status().message()), HasSubstr("written residual has 3 rows"));
  const Tensor residual = Rows(52, 4);
  auto written = SetWritten(h, batch, residual);  // the refused call left the value usable
  ASSERT_TRUE(written.ok()) << written.status();
  EXPECT_EQ(batch.stream->state(), StreamState::kWritten);
  auto x = layer->ffn->Prepare(*written, batch);
  ASSERT_TRUE(x.ok()) << x.status();
  Tensor want = Tensor::Empty({4, 16}, DType::kF32);
  ASSERT_TRUE(kernels::RmsNorm(residual, layer->ffn_norm.weight, layer->ffn_norm.eps, want).ok());
  EXPECT_TRUE(BitEqual(*x, want));
}

}  // namespace
}  // namespace seam::boundary::testing
