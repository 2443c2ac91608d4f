#include "seam/boundary/pipeline_handoff.h"

#include "absl/strings/str_cat.h"
#include "cp_movement.h"
#include "path_executor.h"
#include "seam/boundary/boundary_errors.h"
#include "seam/boundary/plan.h"
#include "seam/core/status.h"
#include "seam/kernels/ops.h"
#include "stream_access.h"
#include "stream_export.h"

namespace seam::boundary {
namespace {

// This rank's attention-TP slice of a tensor on `form` rows.
Tensor MySlice(const Tensor& t, RowForm form, const BatchRows& rows) {
  if (form == RowForm::kAttnTpSlice) return t.is_contiguous() ? t : t.Clone();
  return t.Rows(rows.my_slice_begin(), rows.my_slice_rows()).Clone();
}

}  // namespace

absl::StatusOr<Tensor> GatherSlices(ForwardBatch& batch, const Tensor& slice) {
  PathWork w;
  w.x = slice;
  w.x_form = RowForm::kAttnTpSlice;
  const StepOp op = batch.rows.padded() ? StepOp::kGather : StepOp::kGatherV;
  StepContext ctx{&batch, &batch.comms, nullptr, nullptr};
  SEAM_RETURN_IF_ERROR(
      RunSteps({Step{op, CommGroup::kAttnTp, RowForm::kAttnTpSlice, RowForm::kDpRows}}, ctx, &w));
  return w.x;
}

StreamState PipelineHandoffState(const StageDeclaration& producer, BatchVariant variant, ReductionPolicy policy) {
  // A plain add crosses pending: the receiver's first entry then performs
  // the same add + norm as an unsplit stack would (a stream the producer's
  // exit already wrote crosses with a zero contribution, which adds
  // exactly), so a pipeline split stays bit-identical to no split in every
  // dtype. Folding it here would round the residual once more.
  const UpdateCaps& caps = producer.update->caps();
  return caps.plain_add && !caps.applied_at_exit ? StreamState::kPending : StreamState::kWritten;
}

absl::StatusOr<PipelineTensors> ExportStream(const Hidden& hidden, ForwardBatch& batch) {
  SEAM_ASSIGN_OR_RETURN(ResidualStream * stream, AcceptValue(batch, hidden));
  if (stream->state() == StreamState::kInitial) {
    return absl::FailedPreconditionError("to_pp before any stage ran: hand over the stream after a stage");
  }
  SEAM_RETURN_IF_ERROR(ResolveDeferred(*stream));
  const StagePlan* last = batch.last_plan;
  const StreamState declared =
      last != nullptr ? PipelineHandoffState(last->declaration, batch.variant, last->policy) : stream->state();
  PathWork work = WorkFrom(*stream, hidden);
  std::shared_ptr<const ResidualUpdate> update = PlainAddUpdate();
  if (const Contribution* pending = stream->pending()) {
    update = pending->update;
    SEAM_RETURN_IF_ERROR(CompleteInto(batch, &work));
  }
  // A CP batch crosses on the DP rows: every rank's CP rows gathered back
  // into natural order (the next piece's entry takes its own rows again).
  if (work.r_form == RowForm::kCpRows) {
    if (stream->pending() != nullptr) {
      SEAM_ASSIGN_OR_RETURN(work.c, GatherCpRows(work.c, batch.rows, batch.comms.attn_cp));
    }
    SEAM_ASSIGN_OR_RETURN(work.r, GatherCpRows(work.r, batch.rows, batch.comms.attn_cp));
    work.r_form = work.c_form = RowForm::kDpRows;
  }
  PipelineTensors out;
  out.rows = work.r_form;
  out.state = declared;
  if (declared == StreamState::kWritten) {
    // The producer's update (a plain add, or e.g. MHC's post mix) on the completed contribution.
    if (stream->pending() != nullptr) SEAM_RETURN_IF_ERROR(update->Apply(work.c, work.r));
    out.hidden = work.r;
  } else {
    if (stream->pending() == nullptr) {  // the model wrote the stream itself: nothing left to add
      work.c = Tensor::Zeros(work.r.shape(), work.r.dtype(), work.r.device());
    }
    out.hidden = work.c;
    out.residual = work.r;
  }
  batch.stream.reset();
  return out;
}

absl::StatusOr<PipelineTensors> ToPp(const Hidden& hidden, ForwardBatch& batch) {
  SEAM_ASSIGN_OR_RETURN(PipelineTensors out, ExportStream(hidden, batch));
  out.hidden = MySlice(out.hidden, out.rows, batch.rows);
  if (out.residual.defined()) out.residual = MySlice(out.residual, out.rows, batch.rows);
  out.rows = RowForm::kAttnTpSlice;
  return out;
}

absl::Status CheckPipelineTensors(const PipelineTensors& in, const BatchRows& batch_rows, int64_t hidden_size) {
  if (in.rows == RowForm::kFfnRows) {
    return absl::InvalidArgumentError("a pipeline handoff travels on dp_rows or attn_tp_slice rows, not ffn_rows");
  }
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
  if (!first.bound()) return absl::FailedPreconditionError("from_pp into a stage its layer stack has not bound");
  const StagePlan& plan = first.plan();
  if (!plan.producer.exists) {
    return absl::FailedPreconditionError(
        "from_pp into a stage without a producer: the stack's first stage is entered through Start()");
  }
  const StreamState declared = PipelineHandoffState(plan.producer.declaration, batch.variant, plan.policy);
  PipelineTensors checked = in;
  checked.state = declared;  // the producer's declaration decides, not the header
  if (declared == StreamState::kPending && !in.residual.defined()) {
    return absl::InvalidArgumentError(absl::StrCat("the producer (", plan.producer.declaration.ToString(),
                                                   ") hands over a pending stream; the handoff has no residual"));
  }
  SEAM_RETURN_IF_ERROR(CheckPipelineTensors(checked, batch.rows, /*hidden_size=*/-1));
  const VariantPaths* vp = plan.Find(batch.variant);
  if (vp == nullptr) return errors::NoPathForVariant(BatchVariantName(batch.variant));
  auto entry_on = [&](RowForm r) {
    const IncomingForm form = declared == StreamState::kWritten
                                  ? IncomingForm{StreamState::kWritten, r, SumGroup::kNone, r}
                                  : IncomingForm{StreamState::kPending, r, SumGroup::kNone, r};
    return vp->FindEntry(form) != nullptr;
  };
  Tensor hidden_t = in.hidden, residual_t = declared == StreamState::kPending ? in.residual : Tensor();
  RowForm form = in.rows;
  // Slices stay slices where the first stage takes a residual on them;
  // otherwise they are gathered back onto the DP rows (with one attention-TP
  // rank the slice is the DP rows).
  if (form == RowForm::kAttnTpSlice && !entry_on(form)) {
    if (batch.rows.topology().attn_tp() > 1) {
      SEAM_ASSIGN_OR_RETURN(hidden_t, GatherSlices(batch, hidden_t));
      if (residual_t.defined()) {
        SEAM_ASSIGN_OR_RETURN(residual_t, GatherSlices(batch, residual_t));
      }
    }
    form = RowForm::kDpRows;
  }
  // DP rows (a two-batch split's part) where the first stage keeps the
  // residual on slices: this rank keeps its slice (a local narrow).
  if (form == RowForm::kDpRows && !entry_on(form) && entry_on(RowForm::kAttnTpSlice)) {
    const int64_t begin = batch.rows.my_slice_begin(), count = batch.rows.my_slice_rows();
    hidden_t = hidden_t.Rows(begin, count).Clone();
    if (residual_t.defined()) residual_t = residual_t.Rows(begin, count).Clone();
    form = RowForm::kAttnTpSlice;
  }
  if (!entry_on(form)) {
    return absl::FailedPreconditionError(absl::StrCat("a ", StreamStateName(declared), " handoff on ",
                                                      RowFormName(form), " in a ", BatchVariantName(batch.variant),
                                                      " batch is not a state the first stage's producer hands over"));
  }
  auto stream = std::make_unique<ResidualStream>(batch.microbatch_id);
  if (declared == StreamState::kWritten) {
    stream->Write(hidden_t, form);
  } else {
    stream->Write(residual_t, form);
    stream->Record(Contribution{hidden_t, form, SumGroup::kNone, plan.producer.declaration.update});
  }
  batch.stream = std::move(stream);
  batch.last_plan = nullptr;
  return batch.stream->Issue(hidden_t, false);
}

absl::StatusOr<std::vector<PipelineTensors>> ResliceHandoff(const std::vector<PipelineTensors>& sent,
                                                            const Topology& from,
                                                            const std::vector<int64_t>& from_dp_rows,
                                                            const Topology& to, const std::vector<int64_t>& to_dp_rows,
                                                            BatchVariant variant) {
  SEAM_RETURN_IF_ERROR(ValidateBatchRows(from, from_dp_rows));
  SEAM_RETURN_IF_ERROR(ValidateBatchRows(to, to_dp_rows));
  if (static_cast<int>(sent.size()) != from.tp) {
    return absl::InvalidArgumentError(
        absl::StrCat("handoff has ", sent.size(), " slices; the sending TP group has ", from.tp, " ranks"));
  }
  int64_t from_total = 0, to_total = 0;
  for (int64_t r : from_dp_rows) from_total += r;
  for (int64_t r : to_dp_rows) to_total += r;
  if (from_total != to_total) {
    return absl::InvalidArgumentError(
        absl::StrCat("the sender's batch has ", from_total, " rows, the receiver's ", to_total));
  }
  const bool padded = variant != BatchVariant::kUnpadded;
  const bool pending = sent[0].residual.defined();
  std::vector<Tensor> hiddens, residuals;
  for (int r = 0; r < from.tp; ++r) {
    SEAM_ASSIGN_OR_RETURN(Topology t, Topology::Make(from.tp, from.attn_dp, r, from.attn_cp));
    const BatchRows rows(t, from_dp_rows, padded);
    if (t.cp_rank() != 0) continue;  // CP ranks send the same slices
    PipelineTensors s = sent[r];
    s.state = pending ? StreamState::kPending : StreamState::kWritten;
    if (s.rows != RowForm::kAttnTpSlice) {
      return absl::InvalidArgumentError(absl::StrCat("slice ", r, " is on ", RowFormName(s.rows),
                                                     "; the pipeline sends attention-TP slices"));
    }
    SEAM_RETURN_IF_ERROR(Annotate(CheckPipelineTensors(s, rows, sent[0].hidden.dim(1)), absl::StrCat("slice ", r)));
    hiddens.push_back(s.hidden);
    if (pending) residuals.push_back(s.residual);
  }
  // The slices in TP rank order are every row in order (DP group, then slice).
  auto concat = [](const std::vector<Tensor>& parts) {
    int64_t n = 0;
    for (const Tensor& p : parts) n += p.rows();
    Tensor all = Tensor::Empty({n, parts[0].dim(1)}, parts[0].dtype(), parts[0].device());
    int64_t at = 0;
    for (const Tensor& p : parts) {
      SEAM_CHECK_OK(CopyInto(p, all.Rows(at, p.rows())));
      at += p.rows();
    }
    return all;
  };
  const Tensor all_hidden = concat(hiddens);
  const Tensor all_residual = pending ? concat(residuals) : Tensor();
  std::vector<PipelineTensors> out;
  for (int r = 0; r < to.tp; ++r) {
    SEAM_ASSIGN_OR_RETURN(Topology t, Topology::Make(to.tp, to.attn_dp, r, to.attn_cp));
    const BatchRows rows(t, to_dp_rows, padded);
    int64_t offset = 0;
    for (int d = 0; d < t.dp_rank(); ++d) offset += to_dp_rows[d];
    offset += rows.my_slice_begin();
    PipelineTensors p;
    p.state = sent[0].state;
    p.rows = RowForm::kAttnTpSlice;
    p.hidden = all_hidden.Rows(offset, rows.my_slice_rows()).Clone();
    if (pending) p.residual = all_residual.Rows(offset, rows.my_slice_rows()).Clone();
    out.push_back(std::move(p));
  }
  return out;
}

}  // namespace seam::boundary
