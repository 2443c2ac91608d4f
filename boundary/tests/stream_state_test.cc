// The residual stream's state machine as a model sees it: pending work is
// completed once, owed handles and foreign values are refused, and entering,
// leaving and snapshotting the stream fail with the documented messages.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "rank_threads.h"
#include "seam/boundary/boundary_errors.h"
#include "seam/comm/recording_communicator.h"
#include "seam/core/status.h"
#include "seam/kernels/ops.h"
#include "stage_fixture.h"

namespace seam::boundary::testing {
namespace {

using ::testing::HasSubstr;

constexpr char kNotThisStream[] = "output does not belong to this residual stream; ";

int CountAllReduces(const comm::RecordingWorld& world, int rank) {
  int n = 0;
  for (const comm::CollectiveRecord& r : world.Log(rank)) n += r.kind == comm::CollectiveKind::kAllReduce;
  return n;
}

// Runs `fn` on the two ranks of a tp=2 topology (attention DP `dp`) over the recording fake.
void RunTwoRanks(int dp, const std::shared_ptr<comm::RecordingRegistry>& registry, const RankFn& fn) {
  auto results = RunRanks(2, dp, comm::MakeRecordingGroupFactory(registry), fn);
  for (int r = 0; r < 2; ++r) ASSERT_TRUE(results[r].ok()) << "rank " << r << ": " << results[r];
  ASSERT_TRUE(registry->ExpectSameSequenceInEveryGroup().ok()) << registry->ExpectSameSequenceInEveryGroup();
}

std::shared_ptr<comm::RecordingRegistry> Registry() {
  return std::make_shared<comm::RecordingRegistry>(comm::CommOptions{absl::Seconds(5)});
}

struct SingleRank {
  SingleRank() : topology(*Topology::Make(1, 1, 0)), layer(*BuildOneLayer(topology)) {}
  ForwardBatch Batch(uint64_t id, int64_t rows) {
    ForwardBatch b(id, BatchVariant::kOrdinary, topology, {rows});
    b.comms = self.comms();
    return b;
  }
  Topology topology;
  SelfComms self;
  std::unique_ptr<OneLayer> layer;
};

TEST(StreamState, PendingContributionIsCompletedOnce) {
  const Tensor input = Rows(11, 4);
  auto expected = RunSingleRank(input);
  ASSERT_TRUE(expected.ok()) << expected.status();
  auto registry = Registry();
  RunTwoRanks(1, registry, [&](const Topology& t, const StageComms& comms) -> absl::Status {
    SEAM_ASSIGN_OR_RETURN(auto layer, BuildOneLayer(t));
    std::shared_ptr<comm::RecordingWorld> tp = registry->World("tp", 2);
    ForwardBatch batch(1, BatchVariant::kOrdinary, t, {4});
    batch.comms = comms;
    LayerHooks hooks;
    hooks.after_attn = [&](Hidden h, ForwardBatch&) -> absl::StatusOr<Hidden> {
      EXPECT_TRUE(h.owes_sum());
      EXPECT_EQ(CountAllReduces(*tp, t.tp_rank), 0) << "the attention's exit must only register its sum";
      return h;
    };
    SEAM_ASSIGN_OR_RETURN(Tensor x, layer->attn->Prepare(*Start(batch, input), batch));
    SEAM_ASSIGN_OR_RETURN(Hidden h, layer->attn->Finish(PartialOutput(x, t.attn_tp()), batch));
    SEAM_ASSIGN_OR_RETURN(h, hooks.after_attn(h, batch));
    SEAM_ASSIGN_OR_RETURN(x, layer->ffn->Prepare(h, batch));
    EXPECT_EQ(CountAllReduces(*tp, t.tp_rank), 1) << "the FFN input completes the ATTN_TP sum once";
    SEAM_ASSIGN_OR_RETURN(h, layer->ffn->Finish(PartialOutput(x, t.tp), batch));
    SEAM_ASSIGN_OR_RETURN(Tensor out, FinalNorm(h, batch, layer->final_norm));
    EXPECT_EQ(CountAllReduces(*tp, t.tp_rank), 2) << "the final norm completes the FFN's TP sum once";
    if (!BitEqual(out, *expected)) return absl::InternalError("output differs from the single-rank run");
    return absl::OkStatus();
  });
  // The fused all-reduce + add + norm step is the only collective of the FFN's entry.
  auto t = *Topology::Make(2, 1, 0);
  auto layer = *BuildOneLayer(t);
  const VariantPaths* vp = layer->ffn->plan().Find(BatchVariant::kOrdinary);
  ASSERT_NE(vp, nullptr);
  IncomingForm pending{StreamState::kPending, RowForm::kDpRows, SumGroup::kAttnTp, RowForm::kDpRows};
  const EntryPath* entry = vp->FindEntry(pending);
  ASSERT_NE(entry, nullptr);
  ASSERT_EQ(entry->steps.size(), 1u);
  EXPECT_EQ(entry->steps[0].op, StepOp::kFusedInput);
}

TEST(StreamState, OwedHandleCannotBeUsedAsTensor) {
  const Tensor input = Rows(12, 3);
  RunTwoRanks(1, Registry(), [&](const Topology& t, const StageComms& comms) -> absl::Status {
    SEAM_ASSIGN_OR_RETURN(auto layer, BuildOneLayer(t));
    ForwardBatch batch(1, BatchVariant::kOrdinary, t, {3});
    batch.comms = comms;
    LayerHooks hooks;
    hooks.after_attn = [](Hidden h, ForwardBatch&) -> absl::StatusOr<Hidden> {
      EXPECT_TRUE(h.owes_sum());
      EXPECT_EQ(h.rows(), 3);
      absl::StatusOr<Tensor> as_tensor = h.tensor();
      EXPECT_EQ(as_tensor.status().code(), absl::StatusCode::kFailedPrecondition);
      EXPECT_EQ(as_tensor.status().message(),
                "this output still owes a sum and cannot be used as a tensor; pass it to the next boundary");
      return h;
    };
    return RunLayer(*layer, batch, input, hooks).status();
  });
}

TEST(StreamState, OlderHiddenIsRejectedAndTheLatestStillWorks) {
  SingleRank s;
  ForwardBatch batch = s.Batch(7, 4);
  auto h0 = Start(batch, Rows(13, 4));
  ASSERT_TRUE(h0.ok());
  ASSERT_TRUE(s.layer->attn->Prepare(*h0, batch).ok());
  auto h1 = s.layer->attn->Finish(Rows(14, 4), batch);
  ASSERT_TRUE(h1.ok()) << h1.status();
  auto stale = s.layer->ffn->Prepare(*h0, batch);
  EXPECT_EQ(stale.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(stale.status().message()), HasSubstr(kNotThisStream));
  EXPECT_THAT(std::string(stale.status().message()), HasSubstr("(stream of microbatch 7)"));
  EXPECT_EQ(stale.status(), errors::NotThisStreamsOutput(7));
  EXPECT_TRUE(s.layer->ffn->Prepare(*h1, batch).ok());
}

TEST(StreamState, HiddenOfAnotherMicrobatchIsRejected) {
  SingleRank s;
  ForwardBatch first = s.Batch(1, 4), second = s.Batch(2, 4);
  auto h_first = Start(first, Rows(15, 4));
  auto h_second = Start(second, Rows(16, 4));
  ASSERT_TRUE(h_first.ok() && h_second.ok());
  auto wrong = s.layer->attn->Prepare(*h_second, first);
  EXPECT_EQ(wrong.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(wrong.status().message()), HasSubstr(kNotThisStream));
  EXPECT_THAT(std::string(wrong.status().message()), HasSubstr("(stream of microbatch 1)"));
  EXPECT_TRUE(s.layer->attn->Prepare(*h_first, first).ok());
  EXPECT_TRUE(s.layer->attn->Prepare(*h_second, second).ok());
}

TEST(StreamState, PrepareBeforeStartFails) {
  SingleRank s;
  ForwardBatch batch = s.Batch(1, 4);
  auto x = s.layer->attn->Prepare(Hidden(), batch);
  EXPECT_EQ(x.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(x.status().message(), "start the layer stack before entering a stage");
  auto out = s.layer->attn->Finish(Rows(1, 4), batch);
  EXPECT_EQ(out.status().message(), "start the layer stack before entering a stage");
}

TEST(StreamState, TakeOutputRejectsPendingContributionAndWorksAfterFold) {
  SingleRank s;
  ForwardBatch batch = s.Batch(1, 4);
  const Tensor input = Rows(17, 4), attn_out = Rows(18, 4);
  auto h = Start(batch, input);
  ASSERT_TRUE(s.layer->attn->Prepare(*h, batch).ok());
  auto pending = s.layer->attn->Finish(attn_out, batch);
  ASSERT_TRUE(pending.ok());
  auto taken = TakeOutput(*pending, batch);
  EXPECT_EQ(taken.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(taken.status().message(), "write the residual update before taking the final output");
  auto folded = Fold(*pending, batch);
  ASSERT_TRUE(folded.ok()) << folded.status();
  auto out = TakeOutput(*folded, batch);
  ASSERT_TRUE(out.ok()) << out.status();
  std::vector<float> want = input.ToFloats(), add = attn_out.ToFloats();
  for (size_t i = 0; i < want.size(); ++i) want[i] += add[i];
  EXPECT_TRUE(BitEqual(*out, Tensor::FromFloats(want, {4, 16})));
  EXPECT_EQ(batch.stream, nullptr);
}

class NonLinearUpdate final : public ResidualUpdate {
 public:
  UpdateCaps caps() const override { return UpdateCaps{false, false}; }
  std::string name() const override { return "hyper_connection_post"; }
  absl::Status Apply(const Tensor& c, const Tensor& r) const override {  // r ← r + 2c
    SEAM_RETURN_IF_ERROR(kernels::AddInPlace(r, c));
    return kernels::AddInPlace(r, c);
  }
};

TEST(StreamState, SnapshotRejectsNonPlainUpdate) {
  auto t = *Topology::Make(1, 1, 0);
  OneLayerOptions options;
  options.attn.update = std::make_shared<NonLinearUpdate>();
  auto layer = BuildOneLayer(t, options);
  ASSERT_TRUE(layer.ok()) << layer.status();
  SelfComms self;
  ForwardBatch batch(1, BatchVariant::kOrdinary, t, {4});
  batch.comms = self.comms();
  auto h = Start(batch, Rows(19, 4));
  ASSERT_TRUE((*layer)->attn->Prepare(*h, batch).ok());
  ASSERT_TRUE((*layer)->attn->Finish(Rows(20, 4), batch).ok());
  auto snap = Snapshot(batch);
  EXPECT_EQ(snap.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(snap.status().message(),
            "snapshot requires a plain residual update (the pending update is hyper_connection_post)");
}

TEST(StreamState, SnapshotAddsCompletedContributionWithoutConsumingIt) {
  const Tensor input = Rows(21, 5);
  auto expected = RunSingleRank(input);
  ASSERT_TRUE(expected.ok()) << expected.status();
  RunTwoRanks(1, Registry(), [&](const Topology& t, const StageComms& comms) -> absl::Status {
    SEAM_ASSIGN_OR_RETURN(auto layer, BuildOneLayer(t));
    ForwardBatch batch(1, BatchVariant::kOrdinary, t, {5});
    batch.comms = comms;
    Tensor attn_input;
    LayerHooks hooks;
    hooks.attn_compute = [&](const Tensor& x) {
      attn_input = x;
      return PartialOutput(x, t.attn_tp());
    };
    hooks.after_attn = [&](Hidden h, ForwardBatch& b) -> absl::StatusOr<Hidden> {
      SEAM_ASSIGN_OR_RETURN(Tensor snap, Snapshot(b));
      std::vector<float> want = input.ToFloats(), x = attn_input.ToFloats();
      for (size_t i = 0; i < want.size(); ++i) want[i] += x[i] / 2;
      EXPECT_TRUE(BitEqual(snap, Tensor::FromFloats(want, {5, 16}))) << "rank " << t.tp_rank;
      EXPECT_EQ(b.stream->state(), StreamState::kPending);
      EXPECT_EQ(b.stream->pending()->owed, SumGroup::kAttnTp);
      return h;
    };
    SEAM_ASSIGN_OR_RETURN(Tensor out, RunLayer(*layer, batch, input, hooks));
    if (!BitEqual(out, *expected)) return absl::InternalError("snapshot changed the layer's output");
    return absl::OkStatus();
  });
}

TEST(StreamState, FinalNormOnRankWithoutRowsStillJoinsTheCollective) {
  const std::vector<int64_t> dp_rows = {0, 5};
  const Tensor all = Rows(22, 5);
  auto expected = RunSingleRank(all);
  ASSERT_TRUE(expected.ok()) << expected.status();
  auto registry = std::make_shared<comm::RecordingRegistry>(comm::CommOptions{absl::Seconds(2)});
  RunTwoRanks(2, registry, [&](const Topology& t, const StageComms& comms) -> absl::Status {
    SEAM_ASSIGN_OR_RETURN(auto layer, BuildOneLayer(t));
    ForwardBatch batch(1, BatchVariant::kOrdinary, t, dp_rows);
    batch.comms = comms;
    const Tensor mine = t.dp_rank() == 0 ? all.Rows(0, 0).Clone() : all;
    SEAM_ASSIGN_OR_RETURN(Tensor out, RunLayer(*layer, batch, mine, {}));
    if (out.rows() != dp_rows[t.dp_rank()]) return absl::InternalError("final norm returned the wrong rows");
    if (t.dp_rank() == 1 && !BitEqual(out, *expected)) return absl::InternalError("output differs");
    return absl::OkStatus();
  });
  auto tp = registry->World("tp", 2);
  EXPECT_EQ(tp->Log(0).size(), tp->Log(1).size());
  EXPECT_GT(tp->Log(0).size(), 0u);
}

}  // namespace
}  // namespace seam::boundary::testing
