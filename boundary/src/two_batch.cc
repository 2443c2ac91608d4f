// Splitting a microbatch into the two of a two-batch overlap and merging
// them back (two_batch.h): both go through the stream's handoff state, on
// the DP rows, so each part is rebuilt exactly as a pipeline import is.
#include "seam/boundary/two_batch.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "seam/boundary/boundary_errors.h"
#include "seam/boundary/pipeline_handoff.h"
#include "seam/boundary/plan.h"
#include "seam/boundary/stream_ops.h"
#include "seam/core/status.h"
#include "stream_access.h"
#include "stream_export.h"

namespace seam::boundary {
namespace {

absl::Status NoOpenExitScope(const ForwardBatch& batch, const char* what) {
  if (batch.open_exit_scopes == 0) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(what, " of microbatch ", batch.microbatch_id, " with ",
                                                    batch.open_exit_scopes,
                                                    " exit scope(s) open: finish the scope first"));
}

ForwardBatch MakePart(const ForwardBatch& parent, uint64_t id, std::vector<int64_t> rows, const StageComms& comms) {
  ForwardBatch part(id, parent.variant, parent.rows.topology(), std::move(rows));
  part.rsv_usable = parent.rsv_usable;
  part.comms = comms.tp != nullptr ? comms : parent.comms;
  part.operation_scheduled = true;
  return part;
}

// `t` (on this rank's DP rows or its slice) on the DP rows.
absl::StatusOr<Tensor> OnDpRows(ForwardBatch& batch, const Tensor& t, RowForm form) {
  if (form == RowForm::kDpRows || batch.rows.topology().attn_tp() == 1) return t;
  return GatherSlices(batch, t);
}

// The stream's handoff on the DP rows; releases it.
absl::StatusOr<PipelineTensors> ExportOnDpRows(const Hidden& hidden, ForwardBatch& batch) {
  SEAM_ASSIGN_OR_RETURN(PipelineTensors out, ExportStream(hidden, batch));
  SEAM_ASSIGN_OR_RETURN(out.hidden, OnDpRows(batch, out.hidden, out.rows));
  if (out.residual.defined()) {
    SEAM_ASSIGN_OR_RETURN(out.residual, OnDpRows(batch, out.residual, out.rows));
  }
  out.rows = RowForm::kDpRows;
  return out;
}

Tensor Part(const Tensor& t, int64_t begin, int64_t count) { return t.Rows(begin, count).Clone(); }

// Variants whose residual lives on the slices only.
bool ResidualOnSlices(BatchVariant v) {
  return v == BatchVariant::kInputScattered || v == BatchVariant::kSequenceParallel;
}

}  // namespace

absl::StatusOr<MicrobatchPair> SplitMicrobatches(const Hidden& hidden, ForwardBatch& batch,
                                                 const TwoBatchSplit& split, const StageBoundary* next) {
  if (batch.stream == nullptr) return errors::StreamNotStarted();
  SEAM_RETURN_IF_ERROR(batch.stream->CheckIdentity(hidden));
  SEAM_RETURN_IF_ERROR(NoOpenExitScope(batch, "a two-batch split"));
  const Topology& t = batch.rows.topology();
  const std::vector<int64_t>& all = batch.rows.dp_rows();
  if (split.a_dp_rows.size() != all.size()) {
    return absl::InvalidArgumentError(absl::StrCat("two-batch split: ", split.a_dp_rows.size(),
                                                   " row counts for ", all.size(), " attention-DP groups"));
  }
  std::vector<int64_t> b_rows(all.size());
  for (size_t d = 0; d < all.size(); ++d) {
    if (split.a_dp_rows[d] < 0 || split.a_dp_rows[d] > all[d]) {
      return absl::InvalidArgumentError(absl::StrCat("two-batch split: microbatch A takes [",
                                                     absl::StrJoin(split.a_dp_rows, ", "), "] rows of [",
                                                     absl::StrJoin(all, ", "), "]"));
    }
    b_rows[d] = all[d] - split.a_dp_rows[d];
  }
  const bool initial = batch.stream->state() == StreamState::kInitial;
  if (!initial && (next == nullptr || !next->bound() || !next->plan().producer.exists)) {
    return absl::FailedPreconditionError(
        "a two-batch split of a stream a stage entered needs the bound stage both microbatches enter next");
  }
  const uint64_t id = batch.microbatch_id;
  MicrobatchPair pair{MakePart(batch, 2 * id + 1, split.a_dp_rows, split.a_comms),
                      MakePart(batch, 2 * id + 2, b_rows, split.b_comms)};
  const int64_t a_mine = split.a_dp_rows[t.dp_rank()];
  if (initial) {
    // The stack input: every part starts on its own rows of it.
    const RowForm form = batch.stream->initial_rows();
    const Tensor input = ResidualStream::ValueOf(hidden);
    SEAM_RETURN_IF_ERROR(AcceptValue(batch, hidden).status());
    SEAM_ASSIGN_OR_RETURN(const Tensor rows, OnDpRows(batch, input, form));
    batch.stream.reset();
    for (int i = 0; i < 2; ++i) {
      ForwardBatch& part = pair.batch(i);
      Tensor mine = Part(rows, i == 0 ? 0 : a_mine, part.rows.my_dp_rows());
      const auto [first, count] = StackInputRows(part);
      if (count != mine.rows()) mine = Part(mine, first, count);
      SEAM_ASSIGN_OR_RETURN(pair.hidden(i), Start(part, mine));
    }
    return pair;
  }
  SEAM_ASSIGN_OR_RETURN(const PipelineTensors whole, ExportOnDpRows(hidden, batch));
  for (int i = 0; i < 2; ++i) {
    ForwardBatch& part = pair.batch(i);
    const int64_t begin = i == 0 ? 0 : a_mine, count = part.rows.my_dp_rows();
    PipelineTensors mine;
    mine.state = whole.state;
    mine.rows = RowForm::kDpRows;
    mine.hidden = Part(whole.hidden, begin, count);
    if (whole.residual.defined()) mine.residual = Part(whole.residual, begin, count);
    SEAM_ASSIGN_OR_RETURN(pair.hidden(i), FromPp(mine, part, *next));
  }
  return pair;
}

absl::StatusOr<Hidden> MergeMicrobatches(MicrobatchPair& pair, ForwardBatch& batch) {
  for (int i = 0; i < 2; ++i) {
    SEAM_RETURN_IF_ERROR(NoOpenExitScope(pair.batch(i), "a two-batch merge"));
    if (pair.batch(i).stream == nullptr) return errors::StreamNotStarted();
  }
  if (pair.a.last_plan != pair.b.last_plan) {
    return absl::FailedPreconditionError(
        "a two-batch merge of microbatches that left different stages: run both to the same point first");
  }
  const bool initial = pair.a.stream->state() == StreamState::kInitial;
  if (initial != (pair.b.stream->state() == StreamState::kInitial)) {
    return absl::FailedPreconditionError("a two-batch merge of a started and an entered microbatch");
  }
  if (initial) {  // neither entered a stage: the stack input back together
    Tensor inputs[2];
    for (int i = 0; i < 2; ++i) {
      ForwardBatch& part = pair.batch(i);
      const RowForm form = part.stream->initial_rows();
      inputs[i] = ResidualStream::ValueOf(pair.hidden(i));
      SEAM_RETURN_IF_ERROR(AcceptValue(part, pair.hidden(i)).status());
      SEAM_ASSIGN_OR_RETURN(inputs[i], OnDpRows(part, inputs[i], form));
      part.stream.reset();
    }
    SEAM_ASSIGN_OR_RETURN(Tensor rows, MergeRows(inputs[0], inputs[1]));
    const auto [first, count] = StackInputRows(batch);
    if (count != rows.rows()) rows = Part(rows, first, count);
    return Start(batch, rows);
  }
  PipelineTensors parts[2];
  for (int i = 0; i < 2; ++i) {
    SEAM_ASSIGN_OR_RETURN(parts[i], ExportOnDpRows(pair.hidden(i), pair.batch(i)));
  }
  if (parts[0].state != parts[1].state) {
    return absl::InternalError("the two microbatches' streams left the same stage in different states");
  }
  SEAM_ASSIGN_OR_RETURN(Tensor hidden, MergeRows(parts[0].hidden, parts[1].hidden));
  Tensor residual;
  if (parts[0].state == StreamState::kPending) {
    SEAM_ASSIGN_OR_RETURN(residual, MergeRows(parts[0].residual, parts[1].residual));
  }
  RowForm form = RowForm::kDpRows;
  if (ResidualOnSlices(batch.variant)) {
    const int64_t begin = batch.rows.my_slice_begin(), count = batch.rows.my_slice_rows();
    hidden = Part(hidden, begin, count);
    if (residual.defined()) residual = Part(residual, begin, count);
    form = RowForm::kAttnTpSlice;
  }
  auto stream = std::make_unique<ResidualStream>(batch.microbatch_id);
  const StagePlan* last = pair.a.last_plan;
  if (parts[0].state == StreamState::kWritten) {
    stream->Write(hidden, form);
  } else {
    // Pending only when the last stage's update is a plain add (PipelineHandoffState).
    stream->Write(residual, form);
    stream->Record(Contribution{hidden, form, SumGroup::kNone,
                                last != nullptr ? last->declaration.update : PlainAddUpdate()});
  }
  batch.stream = std::move(stream);
  batch.last_plan = last;
  return batch.stream->Issue(hidden, false);
}

absl::StatusOr<Tensor> MergeRows(const Tensor& a, const Tensor& b) {
  if (!a.defined() || a.rows() == 0) return b.defined() ? b.Clone() : a;
  if (!b.defined() || b.rows() == 0) return a.Clone();
  SEAM_RETURN_IF_ERROR(ExpectRank(a, 2, "microbatch A's rows"));
  SEAM_RETURN_IF_ERROR(ExpectRank(b, 2, "microbatch B's rows"));
  if (a.dim(1) != b.dim(1) || a.dtype() != b.dtype() || a.device() != b.device()) {
    return absl::InvalidArgumentError(absl::StrCat("two-batch merge: microbatch A's rows are ",
                                                   ShapeToString(a.shape()), ", B's ", ShapeToString(b.shape()),
                                                   " (same width, dtype and device needed)"));
  }
  Tensor out = Tensor::Empty({a.rows() + b.rows(), a.dim(1)}, a.dtype(), a.device());
  SEAM_RETURN_IF_ERROR(CopyInto(a, out.Rows(0, a.rows())));
  SEAM_RETURN_IF_ERROR(CopyInto(b, out.Rows(a.rows(), b.rows())));
  return out;
}

}  // namespace seam::boundary
