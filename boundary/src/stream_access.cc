#include "stream_access.h"

#include "seam/boundary/boundary_errors.h"
#include "seam/boundary/deferred_finalize.h"
#include "seam/core/status.h"

namespace seam::boundary {

absl::StatusOr<ResidualStream*> AcceptValue(ForwardBatch& batch, const Hidden& hidden) {
  if (batch.stream == nullptr) return errors::StreamNotStarted();
  SEAM_RETURN_IF_ERROR(batch.stream->CheckIdentity(hidden));
  batch.stream->Consume();
  return batch.stream.get();
}

IncomingForm IncomingOf(const ResidualStream& stream) {
  IncomingForm in;
  in.state = stream.state();
  in.residual = stream.residual_form();
  if (const Contribution* c = stream.pending()) {
    in.rows = c->rows;
    in.owed = c->owed;
  }
  if (in.state == StreamState::kInitial) in.rows = stream.initial_rows();
  return in;
}

PathWork WorkFrom(const ResidualStream& stream, const Hidden& hidden) {
  PathWork w;
  w.r = stream.residual();
  w.r_form = stream.residual_form();
  if (const Contribution* c = stream.pending()) {
    w.c = c->value;
    w.c_form = c->rows;
    w.owed = c->owed;
    w.update = c->update;
  } else if (stream.state() == StreamState::kInitial) {
    w.c = ResidualStream::ValueOf(hidden);
    w.c_form = stream.initial_rows();
  }
  return w;
}

absl::Status ResolveDeferred(ResidualStream& stream) {
  Contribution* c = stream.pending();
  if (c == nullptr || c->deferred == nullptr) return absl::OkStatus();
  SEAM_ASSIGN_OR_RETURN(Tensor value, c->deferred->Complete());
  if (value.rows() != c->deferred->rows()) {
    return absl::InternalError("the producer's unfused finalize returned the wrong rows");
  }
  c->value = std::move(value);
  c->deferred = nullptr;
  return absl::OkStatus();
}

absl::Status CompleteInto(ForwardBatch& batch, PathWork* work) {
  // A contribution a scatter already landed on this rank's slice (its update
  // not applied, as for MHC) takes the residual onto the same slice.
  if (work->c_form == RowForm::kAttnTpSlice && work->r_form == RowForm::kDpRows) {
    work->r = work->r.Rows(batch.rows.my_slice_begin(), batch.rows.my_slice_rows());
    work->r_form = RowForm::kAttnTpSlice;
  }
  const std::vector<Step> steps =
      CompletionSteps(work->c_form, work->owed, work->r_form, batch.variant, batch.rows.topology());
  StepContext ctx{&batch, &batch.comms, nullptr, nullptr};
  SEAM_RETURN_IF_ERROR(RunSteps(steps, ctx, work));
  work->c_form = work->r_form;
  work->owed = SumGroup::kNone;
  return absl::OkStatus();
}

}  // namespace seam::boundary
