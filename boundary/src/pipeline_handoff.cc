#include "seam/boundary/pipeline_handoff.h"

#include "absl/strings/str_cat.h"
#include "seam/boundary/plan.h"
#include "seam/core/status.h"
#include "stream_access.h"

namespace seam::boundary {

absl::StatusOr<PipelineTensors> ToPp(const Hidden& hidden, ForwardBatch& batch) {
  SEAM_ASSIGN_OR_RETURN(ResidualStream * stream, AcceptValue(batch, hidden));
  PipelineTensors out;
  out.rows = stream->residual_form();
  if (stream->state() == StreamState::kInitial) {
    return absl::FailedPreconditionError("to_pp before any stage ran: hand over the stream after a stage");
  }
  if (const Contribution* pending = stream->pending()) {
    if (!pending->update->caps().plain_add) {
      return absl::UnimplementedError(
          absl::StrCat("to_pp of a pending ", pending->update->name(), " update (only plain adds travel pending)"));
    }
    PathWork work = WorkFrom(*stream, hidden);
    SEAM_RETURN_IF_ERROR(CompleteInto(batch, &work));
    out.state = StreamState::kPending;
    out.hidden = work.c.is_contiguous() ? work.c : work.c.Clone();
    out.residual = stream->residual();
  } else {
    out.state = StreamState::kWritten;
    out.hidden = stream->residual();
  }
  batch.stream.reset();
  return out;
}

absl::Status CheckPipelineTensors(const PipelineTensors& in, const BatchRows& batch_rows, int64_t hidden_size) {
  const int64_t rows = batch_rows.RowsOf(in.rows);
  SEAM_RETURN_IF_ERROR(ExpectRank(in.hidden, 2, "pipeline hidden"));
  if (in.hidden.rows() != rows) {
    return absl::InvalidArgumentError(absl::StrCat("pipeline hidden has ", in.hidden.rows(), " rows; this rank's ",
                                                   RowFormName(in.rows), " hold ", rows));
  }
  if (hidden_size >= 0 && in.hidden.dim(1) != hidden_size) {
    return absl::InvalidArgumentError(absl::StrCat("pipeline hidden is ", in.hidden.dim(1), " wide; the model's ",
                                                   "hidden size is ", hidden_size));
  }
  if (in.state == StreamState::kPending) {
    SEAM_RETURN_IF_ERROR(ExpectSameShape(in.residual, in.hidden, "pipeline residual", "pipeline hidden"));
  } else if (in.state != StreamState::kWritten) {
    return absl::InvalidArgumentError("a pipeline handoff is written or pending, never initial");
  }
  return absl::OkStatus();
}

absl::StatusOr<Hidden> FromPp(const PipelineTensors& in, ForwardBatch& batch, const StageBoundary& first) {
  SEAM_RETURN_IF_ERROR(CheckPipelineTensors(in, batch.rows, /*hidden_size=*/-1));
  if (!first.bound()) return absl::FailedPreconditionError("from_pp into a stage its layer stack has not bound");
  auto stream = std::make_unique<ResidualStream>(batch.microbatch_id);
  if (in.state == StreamState::kWritten) {
    stream->Write(in.hidden, in.rows);
  } else {
    stream->Write(in.residual, in.rows);
    stream->Record(Contribution{in.hidden, in.rows, SumGroup::kNone, PlainAddUpdate()});
  }
  const VariantPaths* vp = first.plan().Find(batch.variant);
  const IncomingForm form = IncomingOf(*stream);
  if (vp == nullptr || vp->FindEntry(form) == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat("handoff ", form.ToString(), " in a ",
                                                      BatchVariantName(batch.variant),
                                                      " batch is not a state the first stage's producer hands over"));
  }
  batch.stream = std::move(stream);
  batch.last_plan = nullptr;
  return batch.stream->Issue(in.hidden, false);
}

}  // namespace seam::boundary
