// Every row of the design's common-errors table, reproduced as a model would
// hit it and asserted by code and exact message (boundary_errors.h holds the
// wording): a forward, a split-prefill segment and an MTP head that skip
// Start, a rebound or foreign output, take_output on a pending update, an
// unserved batch variant, appending outside a stack, a prepared branch
// entered through prepare, and a snapshot of a nonlinear update.
#include <gtest/gtest.h>

#include "seam/boundary/boundary_errors.h"
#include "seam/boundary/branch.h"
#include "seam/core/status.h"
#include "stage_fixture.h"

namespace seam::boundary::testing {
namespace {

const Topology kOne = *Topology::Make(1, 1, 0);

ForwardBatch Batch(const SelfComms& self, uint64_t id, int64_t rows, BatchVariant v = BatchVariant::kOrdinary) {
  ForwardBatch b(id, v, kOne, {rows});
  b.comms = self.comms();
  return b;
}

void ExpectError(const absl::Status& s, absl::StatusCode code, const std::string& message) {
  EXPECT_EQ(s.code(), code) << s;
  EXPECT_EQ(s.message(), message);
}

constexpr char kStart[] = "start the layer stack before entering a stage";

TEST(CommonErrors, AForwardThatSkipsStartIsRefused) {
  auto layer = *BuildOneLayer(kOne);
  SelfComms self;
  ForwardBatch batch = Batch(self, 1, 3);
  ExpectError(layer->attn->Prepare(Hidden(), batch).status(), absl::StatusCode::kFailedPrecondition, kStart);
  ExpectError(layer->attn->Finish(Rows(1, 3), batch).status(), absl::StatusCode::kFailedPrecondition, kStart);
  EXPECT_EQ(layer->attn->Prepare(Hidden(), batch).status(), errors::StreamNotStarted());
}

TEST(CommonErrors, SplitPrefillStartsOnlyInTheFirstSegmentAndCompletesOnlyInTheLast) {
  // Two layers, each its own prefill segment over one batch.
  NormParams norm = UnitNorm(), final_norm = UnitNorm();
  LayerStack stack(LayerStackOptions{kOne, ReductionPolicy::kAr});
  auto b = *SEAM_APPEND_STAGES(0, StageItem{DeclareAttn(), &norm}, StageItem{DeclareFfn(), &norm});
  auto c = *SEAM_APPEND_STAGES(1, StageItem{DeclareAttn(), &norm}, StageItem{DeclareFfn(), &norm});
  ASSERT_TRUE(stack.Close().ok());
  SelfComms self;
  auto layer = [&](const std::vector<std::shared_ptr<StageBoundary>>& s, Hidden h,
                   ForwardBatch& batch) -> absl::StatusOr<Hidden> {
    SEAM_ASSIGN_OR_RETURN(Tensor x, s[0]->Prepare(h, batch));
    SEAM_ASSIGN_OR_RETURN(h, s[0]->Finish(PartialOutput(x, 1), batch));
    SEAM_ASSIGN_OR_RETURN(x, s[1]->Prepare(h, batch));
    return s[1]->Finish(PartialOutput(x, 1), batch);
  };
  const Tensor input = Rows(2, 4);
  ForwardBatch whole = Batch(self, 1, 4);
  Hidden h = *Start(whole, input);
  h = *layer(b, h, whole);
  h = *layer(c, h, whole);
  const Tensor unsplit = *FinalNorm(h, whole, final_norm);

  // Right: segment 1 starts and runs layer 0; segment 2 continues the same stream and ends it.
  ForwardBatch batch = Batch(self, 2, 4);
  Hidden seg = *Start(batch, input);
  seg = *layer(b, seg, batch);
  seg = *layer(c, seg, batch);
  EXPECT_TRUE(BitEqual(*FinalNorm(seg, batch, final_norm), unsplit));

  // Wrong: the second segment runs on a batch whose stream nobody started.
  ForwardBatch second = Batch(self, 3, 4);
  ExpectError(layer(c, Hidden(), second).status(), absl::StatusCode::kFailedPrecondition, kStart);
  // Wrong: the first segment already completed the stream (final norm), so the next segment has none.
  ForwardBatch early = Batch(self, 4, 4);
  Hidden e = *Start(early, input);
  e = *layer(b, e, early);
  ASSERT_TRUE(FinalNorm(e, early, final_norm).ok());
  ExpectError(layer(c, e, early).status(), absl::StatusCode::kFailedPrecondition, kStart);
}

TEST(CommonErrors, AnMtpHeadInItsOwnStackMustStartItsStream) {
  NormParams norm = UnitNorm();
  LayerStack draft(LayerStackOptions{kOne, ReductionPolicy::kAr});  // an MTP draft is its own stack
  auto head = *SEAM_APPEND_STAGES(0, StageItem{DeclareAttn(), &norm}, StageItem{DeclareFfn(), &norm});
  ASSERT_TRUE(draft.Close().ok());
  SelfComms self;
  ForwardBatch batch = Batch(self, 1, 2);
  ExpectError(head[0]->Prepare(Hidden(), batch).status(), absl::StatusCode::kFailedPrecondition, kStart);
  Hidden h = *Start(batch, Rows(3, 2));
  EXPECT_TRUE(head[0]->Prepare(h, batch).ok());
}

TEST(CommonErrors, AReboundOrForeignOutputIsRefused) {
  auto layer = *BuildOneLayer(kOne);
  SelfComms self;
  ForwardBatch a = Batch(self, 1, 3), b = Batch(self, 2, 3);
  Hidden ha = *Start(a, Rows(1, 3));
  Hidden hb = *Start(b, Rows(1, 3));
  const std::string msg =
      "output does not belong to this residual stream; change layer outputs through boundary accessors "
      "(stream of microbatch 1)";
  // Another microbatch's output.
  ExpectError(layer->attn->Prepare(hb, a).status(), absl::StatusCode::kFailedPrecondition, msg);
  // A value rebound to an earlier one (the stream issued a newer value since).
  Tensor x = *layer->attn->Prepare(ha, a);
  Hidden out = *layer->attn->Finish(x, a);
  ExpectError(layer->ffn->Prepare(ha, a).status(), absl::StatusCode::kFailedPrecondition, msg);
  // A default-constructed value standing in for the output.
  ExpectError(layer->ffn->Prepare(Hidden(), a).status(), absl::StatusCode::kFailedPrecondition, msg);
  EXPECT_TRUE(layer->ffn->Prepare(out, a).ok());
}

TEST(CommonErrors, TakeOutputWithAPendingUpdateIsRefused) {
  auto layer = *BuildOneLayer(kOne);
  SelfComms self;
  ForwardBatch batch = Batch(self, 1, 3);
  Hidden h = *Start(batch, Rows(1, 3));
  Tensor x = *layer->attn->Prepare(h, batch);
  h = *layer->attn->Finish(x, batch);
  ExpectError(TakeOutput(h, batch).status(), absl::StatusCode::kFailedPrecondition,
              "write the residual update before taking the final output");
  EXPECT_TRUE(TakeOutput(*Fold(h, batch), batch).ok());
}

TEST(CommonErrors, AnUnservedBatchVariantHasNoStagePath) {
  SelfComms self;
  // UNPADDED and CONTEXT_PARALLEL are served without attention DP only.
  const Topology dp2 = *Topology::Make(2, 2, 0);
  auto dp_layer = *BuildOneLayer(dp2);
  for (BatchVariant v : {BatchVariant::kUnpadded, BatchVariant::kContextParallel}) {
    ForwardBatch batch(1, v, dp2, {3, 2});
    batch.comms = self.comms();
    Hidden h = *Start(batch, Rows(1, 3));
    ExpectError(dp_layer->attn->Prepare(h, batch).status(), absl::StatusCode::kUnimplemented,
                absl::StrCat("no stage boundary path for the active ", BatchVariantName(v), " batch"));
  }
}

TEST(CommonErrors, AppendStagesOutsideALayerStackIsRefused) {
  NormParams norm = UnitNorm();
  ASSERT_EQ(LayerStack::Current(), nullptr);
  ExpectError(SEAM_APPEND_STAGES(0, StageItem{DeclareAttn(), &norm}).status(), absl::StatusCode::kFailedPrecondition,
              "append_stages needs an open layer stack; open a LayerStack around the layers' construction");
}

TEST(CommonErrors, APreparedBranchEnteredThroughPrepareIsRefused) {
  NormParams norm = UnitNorm();
  LayerStack stack(LayerStackOptions{kOne, ReductionPolicy::kAr});
  auto main = *SEAM_APPEND_STAGES(0, StageItem{DeclareAttn(), &norm}, StageItem{DeclareFfn({true, false, true}), &norm});
  auto branch = *SEAM_APPEND_BRANCH(0, *main[1], StageItem{DeclareFfn(), &norm});
  ASSERT_TRUE(stack.Close().ok());
  SelfComms self;
  ForwardBatch batch = Batch(self, 1, 3);
  Hidden h = *Start(batch, Rows(1, 3));
  ExpectError(branch[0]->Prepare(h, batch).status(), absl::StatusCode::kFailedPrecondition,
              "a prepared branch must enter through branch_input, not prepare");
}

TEST(CommonErrors, ASnapshotOfANonlinearUpdateIsRefused) {
  NormParams norm = UnitNorm();
  StageDeclaration attn = DeclareAttn();
  attn.update = *MhcUpdate::Make(MhcCoefficients{1, {1}, {1}, {1}});
  attn.readout_caps = MhcRead::Caps();
  auto read = *MhcRead::Make(MhcCoefficients{1, {1}, {1}, {1}}, &norm);
  LayerStack stack(LayerStackOptions{kOne, ReductionPolicy::kAr});
  auto b = *SEAM_APPEND_STAGES(0, StageItem{attn, &norm, {}, read});
  ASSERT_TRUE(stack.Close().ok());
  SelfComms self;
  ForwardBatch batch = Batch(self, 1, 3);
  Hidden h = *Start(batch, Rows(1, 3));
  Tensor x = *b[0]->Prepare(h, batch);
  h = *b[0]->Finish(x, batch);
  ExpectError(Snapshot(batch).status(), absl::StatusCode::kFailedPrecondition,
              "snapshot requires a plain residual update (the pending update is mhc_post)");
}

}  // namespace
}  // namespace seam::boundary::testing
