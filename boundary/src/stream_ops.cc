#include "seam/boundary/stream_ops.h"

#include "absl/strings/str_cat.h"
#include "path_executor.h"
#include "seam/boundary/boundary_errors.h"
#include "seam/boundary/plan.h"
#include "seam/comm/communicator.h"
#include "seam/comm/self_communicator.h"
#include "seam/core/status.h"
#include "seam/kernels/ops.h"
#include "stream_access.h"

namespace seam::boundary {
namespace {

absl::Status RequirePlain(const Contribution& c) {
  if (!c.update->caps().plain_add) return errors::SnapshotNeedsPlainUpdate(c.update->name());
  return absl::OkStatus();
}

}  // namespace

std::pair<int64_t, int64_t> StackInputRows(const ForwardBatch& batch) {
  if (batch.variant == BatchVariant::kInputScattered) return {batch.rows.my_slice_begin(), batch.rows.my_slice_rows()};
  return {0, batch.rows.my_dp_rows()};
}

absl::StatusOr<Hidden> Start(ForwardBatch& batch, const Tensor& input) {
  const RowForm rows =
      batch.variant == BatchVariant::kInputScattered ? RowForm::kAttnTpSlice : RowForm::kDpRows;
  SEAM_RETURN_IF_ERROR(ExpectRank(input, 2, "stack input"));
  if (input.rows() != batch.rows.RowsOf(rows)) {
    return absl::InvalidArgumentError(absl::StrCat("stack input has ", input.rows(), " rows; this rank's ",
                                                   RowFormName(rows), " hold ", batch.rows.RowsOf(rows)));
  }
  batch.stream = std::make_unique<ResidualStream>(batch.microbatch_id);
  batch.stream->set_initial_rows(rows);
  batch.last_plan = nullptr;
  return batch.stream->Issue(input, false);
}

namespace {

// The final norm of a finalize handoff through `service`: this rank's
// residual rows of the handoff are finalized, summed, added and normed in
// one operation, then gathered onto the DP rows when the residual is a slice.
absl::StatusOr<Tensor> FinalizeNormed(ResidualStream& stream, ForwardBatch& batch, const NormParams& norm,
                                      FinalizeNormService& service) {
  const Contribution& c = *stream.pending();
  const BatchRows& rows = batch.rows;
  const Topology& t = rows.topology();
  PathWork work;
  work.r = stream.residual();
  work.r_form = stream.residual_form();
  int64_t offset = t.attn_dp > 1 ? rows.FfnOffset(t.dp_rank()) : 0;
  if (work.r_form == RowForm::kAttnTpSlice) offset += rows.my_slice_begin();
  work.x = Tensor::Empty(work.r.shape(), work.r.dtype(), work.r.device());
  // A group of one rank may come without a communicator (a single-GPU
  // model): its sum is the identity, so a self communicator stands in.
  const CommGroup completing = GroupCompleting(SumGroup::kMoeOutput);
  std::unique_ptr<comm::Communicator> self;
  if (t.tp == 1 && batch.comms.tp == nullptr) self = comm::MakeSelfCommunicator(CommGroupName(completing));
  comm::Communicator& group = self != nullptr ? *self : GroupComm(batch.comms, completing);
  SEAM_CHECK_MSG(batch.last_plan != nullptr, "a finalize handoff without the plan of the stage that made it");
  SEAM_RETURN_IF_ERROR(service.Finalize(*c.deferred, offset, work.r, norm, work.x, group, *batch.last_plan));
  work.x_form = work.r_form;
  if (work.r_form == RowForm::kAttnTpSlice && t.attn_tp() > 1) {
    StepContext ctx{&batch, &batch.comms, nullptr, nullptr};
    const StepOp op = rows.padded() ? StepOp::kGather : StepOp::kGatherV;
    SEAM_RETURN_IF_ERROR(RunSteps({Step{op, CommGroup::kAttnTp, RowForm::kAttnTpSlice, RowForm::kDpRows}}, ctx, &work));
  }
  return work.x;
}

}  // namespace

absl::StatusOr<Tensor> FinalNorm(const Hidden& hidden, ForwardBatch& batch, const NormParams& norm,
                                 FinalNormOptions options) {
  SEAM_ASSIGN_OR_RETURN(ResidualStream * stream, AcceptValue(batch, hidden));
  std::shared_ptr<const ResidualReadout> default_read;
  const ResidualReadout* read = options.read;
  if (read == nullptr) {
    default_read = std::make_shared<AddRmsNormRead>(&norm);
    read = default_read.get();
  }
  const Contribution* handoff = stream->pending();
  if (handoff != nullptr && handoff->deferred != nullptr) {
    if (options.capture && options.finalize_norm != nullptr) return errors::CaptureWithFinalizeHandoff();
    // The fused service adds and norms: it serves a plain add into an add+norm read only.
    if (options.finalize_norm != nullptr && handoff->update->caps().plain_add && read->add_norm() != nullptr) {
      SEAM_ASSIGN_OR_RETURN(Tensor out, FinalizeNormed(*stream, batch, norm, *options.finalize_norm));
      batch.stream.reset();
      return out;
    }
    SEAM_RETURN_IF_ERROR(ResolveDeferred(*stream));
  }
  const IncomingForm in = IncomingOf(*stream);
  EntryPath built;
  const EntryPath* path = nullptr;
  if (batch.last_plan != nullptr) {
    const VariantPaths* vp = batch.last_plan->Find(batch.variant);
    if (vp == nullptr) return errors::NoPathForVariant(BatchVariantName(batch.variant));
    path = vp->FindFinalRead(in);
    if (path == nullptr && !vp->final_read.empty()) {
      return absl::InternalError(absl::StrCat("the final read has no path for ", in.ToString()));
    }
  }
  if (path == nullptr) {  // an empty stack, or a stack left early through a non-terminal stage
    built = BuildEntryPath(in, RowForm::kDpRows, batch.variant, batch.rows.topology(), false);
    path = &built;
  }
  StepContext ctx{&batch, &batch.comms, read, nullptr};
  ctx.skip_empty_norm = options.skip_empty;
  ctx.attn_tp_gather = &options.attn_tp_gather;
  PathWork work = WorkFrom(*stream, hidden);
  SEAM_RETURN_IF_ERROR(RunSteps(path->steps, ctx, &work));
  if (options.capture) options.capture(work.r, /*owned=*/false);  // the updated residual, borrowed
  batch.stream.reset();
  return work.x;
}

absl::StatusOr<Hidden> CompleteOutput(const Hidden& hidden, ForwardBatch& batch) {
  SEAM_ASSIGN_OR_RETURN(ResidualStream * stream, AcceptValue(batch, hidden));
  SEAM_RETURN_IF_ERROR(ResolveDeferred(*stream));  // the producer's unfused finalize runs first
  const Contribution* pending = stream->pending();
  if (pending == nullptr) return stream->Issue(ResidualStream::ValueOf(hidden), false);
  PathWork work = WorkFrom(*stream, hidden);
  SEAM_RETURN_IF_ERROR(CompleteInto(batch, &work));
  stream->ReplaceResidual(work.r, work.r_form);
  stream->Record(Contribution{work.c, work.c_form, SumGroup::kNone, pending->update});
  return stream->Issue(work.c, false);
}

absl::StatusOr<Hidden> Fold(const Hidden& hidden, ForwardBatch& batch) {
  SEAM_ASSIGN_OR_RETURN(ResidualStream * stream, AcceptValue(batch, hidden));
  SEAM_RETURN_IF_ERROR(ResolveDeferred(*stream));
  const Contribution* pending = stream->pending();
  if (pending == nullptr) return stream->Issue(stream->residual(), false);
  PathWork work = WorkFrom(*stream, hidden);
  SEAM_RETURN_IF_ERROR(CompleteInto(batch, &work));
  // The producer's own update, on the completed contribution (a plain add or not).
  SEAM_RETURN_IF_ERROR(work.update->Apply(work.c, work.r));
  stream->Write(work.r, work.r_form);
  return stream->Issue(work.r, false);
}

absl::StatusOr<Hidden> SetWritten(const Hidden& hidden, ForwardBatch& batch, const Tensor& residual) {
  // Check the residual before accepting the value: a refused call leaves it usable.
  if (batch.stream == nullptr) return errors::StreamNotStarted();
  SEAM_RETURN_IF_ERROR(batch.stream->CheckIdentity(hidden));
  ResidualStream* stream = batch.stream.get();
  const RowForm form = stream->state() == StreamState::kInitial ? stream->initial_rows() : stream->residual_form();
  if (residual.rows() != batch.rows.RowsOf(form)) {
    return absl::InvalidArgumentError(absl::StrCat("written residual has ", residual.rows(), " rows; the stream's ",
                                                   RowFormName(form), " hold ", batch.rows.RowsOf(form)));
  }
  SEAM_RETURN_IF_ERROR(AcceptValue(batch, hidden).status());
  stream->Write(residual, form);
  return stream->Issue(residual, false);
}

absl::StatusOr<Tensor> TakeOutput(const Hidden& hidden, ForwardBatch& batch) {
  // Refuse a pending stream before accepting the value, so that the caller can
  // still Fold() the value it holds and take the output then.
  if (batch.stream == nullptr) return errors::StreamNotStarted();
  SEAM_RETURN_IF_ERROR(batch.stream->CheckIdentity(hidden));
  if (batch.stream->state() != StreamState::kWritten) return errors::TakeOutputWithPendingUpdate();
  SEAM_ASSIGN_OR_RETURN(ResidualStream * stream, AcceptValue(batch, hidden));
  Tensor out = stream->residual();
  batch.stream.reset();
  return out;
}

absl::StatusOr<Hidden> AddToOutput(const Hidden& hidden, ForwardBatch& batch, const Tensor& extra) {
  // Refuse before accepting the value, so a refused call leaves it usable.
  if (batch.stream == nullptr) return errors::StreamNotStarted();
  SEAM_RETURN_IF_ERROR(batch.stream->CheckIdentity(hidden));
  if (batch.stream->pending() == nullptr) {
    return absl::FailedPreconditionError("add_to_output needs a pending contribution; the stream is written");
  }
  SEAM_ASSIGN_OR_RETURN(Hidden complete, CompleteOutput(hidden, batch));
  ResidualStream* stream = batch.stream.get();
  Contribution* pending = stream->pending();
  SEAM_RETURN_IF_ERROR(ExpectSameShape(pending->value, extra, "layer output", "extra contribution"));
  Tensor sum = pending->value.Clone();
  SEAM_RETURN_IF_ERROR(kernels::AddInPlace(sum, extra));
  pending->value = sum;
  stream->Consume();
  return stream->Issue(sum, false);
}

absl::StatusOr<Tensor> Snapshot(ForwardBatch& batch) {
  if (batch.stream == nullptr) return errors::StreamNotStarted();
  ResidualStream* stream = batch.stream.get();
  if (stream->state() == StreamState::kInitial) {
    return absl::FailedPreconditionError("nothing to snapshot: no stage has entered the stream yet");
  }
  if (stream->state() == StreamState::kWritten) return stream->residual().Clone();
  const Contribution& pending = *stream->pending();
  if (pending.deferred != nullptr) return errors::SnapshotOfFinalizeHandoff();
  SEAM_RETURN_IF_ERROR(RequirePlain(pending));
  PathWork work;
  work.c = pending.value.Clone();
  work.c_form = pending.rows;
  work.owed = pending.owed;
  work.r = stream->residual().Clone();
  work.r_form = stream->residual_form();
  SEAM_RETURN_IF_ERROR(CompleteInto(batch, &work));
  SEAM_RETURN_IF_ERROR(kernels::AddInPlace(work.r, work.c));
  return work.r;
}

}  // namespace seam::boundary
