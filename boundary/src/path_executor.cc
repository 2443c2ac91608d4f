#include "path_executor.h"

#include "absl/strings/str_cat.h"
#include "cp_movement.h"
#include "row_movement.h"
#include "seam/comm/communicator.h"
#include "seam/core/status.h"
#include "seam/kernels/ops.h"

namespace seam::boundary {

comm::Communicator& GroupComm(const StageComms& comms, CommGroup group) {
  comm::Communicator* c = nullptr;
  switch (group) {
    case CommGroup::kTp: c = comms.tp; break;
    case CommGroup::kAttnTp: c = comms.attn_tp; break;
    case CommGroup::kAttnDp: c = comms.attn_dp; break;
    case CommGroup::kAttnCp: c = comms.attn_cp; break;
    case CommGroup::kNone: break;
  }
  SEAM_CHECK_MSG(c != nullptr, "no communicator for group ", CommGroupName(group));
  return *c;
}

namespace {

absl::Status RunStep(const Step& s, const StepContext& ctx, PathWork* w);

// FFN rows of a padded multi-DP batch, compacted to Σ R_d rows.
Tensor CompactFfnRows(const Tensor& t, const BatchRows& rows) {
  if (!rows.padded() || rows.topology().attn_dp == 1) return t;
  Shape s = t.shape();
  s[0] = rows.total_rows();
  Tensor out = Tensor::Empty(s, t.dtype(), t.device());
  int64_t at = 0;
  for (int d = 0; d < rows.topology().attn_dp; ++d) {
    SEAM_CHECK_OK(CopyInto(t.Rows(rows.FfnOffset(d), rows.dp_rows()[d]), out.Rows(at, rows.dp_rows()[d])));
    at += rows.dp_rows()[d];
  }
  return out;
}

// This rank's rows of `to`, as an offset into a tensor of `from` rows.
int64_t OwnOffset(RowForm from, RowForm to, const BatchRows& rows) {
  const int dp = rows.topology().dp_rank();
  int64_t off = from == RowForm::kFfnRows ? rows.FfnOffset(dp) : 0;
  if (to == RowForm::kAttnTpSlice) off += rows.my_slice_begin();
  return off;
}

absl::Status Scatter(const Step& s, const StepContext& ctx, PathWork* w) {
  const BatchRows& rows = ctx.batch->rows;
  comm::Communicator& g = GroupComm(*ctx.comms, s.group);
  if (s.to == RowForm::kCpRows) {
    SEAM_ASSIGN_OR_RETURN(w->c, ReduceScatterCpRows(g, w->c, rows));
  } else if (s.op == StepOp::kReduceScatter) {
    const int64_t chunk = rows.padded_dp_rows() / rows.topology().attn_tp();
    SEAM_ASSIGN_OR_RETURN(w->c, rows::ReduceScatterPadded(g, w->c, chunk, rows.my_slice_rows()));
  } else if (s.from == RowForm::kDpRows) {
    SEAM_ASSIGN_OR_RETURN(w->c, rows::ReduceScatterCounts(g, w->c, rows.AttnTpSliceCounts()));
  } else {
    SEAM_ASSIGN_OR_RETURN(w->c, rows::ReduceScatterCounts(g, CompactFfnRows(w->c, rows), rows.TpSliceCounts()));
  }
  w->c_form = s.to;
  w->owed = SumGroup::kNone;
  return absl::OkStatus();
}

absl::Status Gather(const Step& s, const StepContext& ctx, PathWork* w) {
  const BatchRows& rows = ctx.batch->rows;
  const Topology& t = rows.topology();
  if (s.group == CommGroup::kAttnCp) {  // CP rows back to natural order
    SEAM_ASSIGN_OR_RETURN(w->x, GatherCpRows(w->x, rows, ctx.comms->attn_cp));
    w->x_form = s.to;
    return absl::OkStatus();
  }
  comm::Communicator& g = GroupComm(*ctx.comms, s.group);
  const bool to_dp = s.to == RowForm::kDpRows;
  if (ctx.attn_tp_gather != nullptr && *ctx.attn_tp_gather && s.group == CommGroup::kAttnTp && to_dp) {
    Tensor out = Tensor::Empty({rows.RowsOf(RowForm::kDpRows), w->x.dim(1)}, w->x.dtype(), w->x.device());
    SEAM_ASSIGN_OR_RETURN(bool done, (*ctx.attn_tp_gather)(w->x, rows, g, out));
    if (done) {
      w->x = out;
      w->x_form = s.to;
      return absl::OkStatus();
    }
  }
  if (s.op == StepOp::kGather) {
    const int64_t chunk = s.from == RowForm::kDpRows ? rows.padded_dp_rows() : rows.padded_dp_rows() / t.attn_tp();
    SEAM_ASSIGN_OR_RETURN(Tensor out, rows::GatherPadded(g, w->x, chunk));
    // Real rows of a gathered DP group (or of the single DP group's FFN rows) come first.
    const bool trim = to_dp || t.attn_dp == 1;
    w->x = trim ? out.Rows(0, rows.RowsOf(s.to)) : out;
  } else {
    std::vector<int64_t> counts = s.from == RowForm::kDpRows ? rows.dp_rows()
                                  : to_dp                     ? rows.AttnTpSliceCounts()
                                                              : rows.TpSliceCounts();
    SEAM_ASSIGN_OR_RETURN(w->x, rows::GatherCounts(g, w->x, counts));
  }
  w->x_form = s.to;
  return absl::OkStatus();
}

absl::Status AddBeforeSum(const StepContext& ctx, PathWork* w) {
  const BatchRows& rows = ctx.batch->rows;
  if (w->r_form == RowForm::kCpRows) return AddCpResidual(&w->c, w->r, rows);
  if (w->r_form == RowForm::kDpRows && rows.topology().attn_tp_rank() != 0) return absl::OkStatus();
  const int64_t off = OwnOffset(RowForm::kFfnRows, w->r_form, rows);
  if (!w->c.is_contiguous()) w->c = w->c.Clone();
  return kernels::AddInPlace(w->c.Rows(off, w->r.rows()), w->r);
}

// Whether the contribution still owes a sum over more than one rank.
bool StillOwed(const StepContext& ctx, const PathWork& w) {
  return SumGroupSize(w.owed, ctx.batch->rows.topology()) > 1;
}

// The compute input a read of the residual produces (its width is the read's).
Tensor ReadOutput(const StepContext& ctx, const PathWork& w) {
  return Tensor::Empty({w.r.rows(), ctx.read->InputWidth(w.r.dim(1))}, w.r.dtype(), w.r.device());
}

absl::Status UpdateAndRead(const StepContext& ctx, PathWork* w) {
  SEAM_CHECK_MSG(ctx.read != nullptr, "entry path without a read");
  if (w->c.rows() != w->r.rows()) {
    return absl::InternalError(absl::StrCat("contribution rows ", w->c.rows(), " do not match residual rows ",
                                            w->r.rows(), " on ", RowFormName(w->r_form)));
  }
  if (!w->update->caps().plain_add && StillOwed(ctx, *w)) {
    return absl::InternalError(absl::StrCat("the ", w->update->name(), " update cannot move before the sum over ",
                                            SumGroupName(w->owed), " completes"));
  }
  w->x = ReadOutput(ctx, *w);
  w->x_form = w->r_form;
  if (ctx.skip_empty_norm && w->r.rows() == 0) return absl::OkStatus();
  return ctx.read->UpdateAndRead(*w->update, w->c, w->r, w->x);
}

absl::Status FusedInput(const Step& s, const StepContext& ctx, PathWork* w) {
  comm::Communicator& g = GroupComm(*ctx.comms, s.group);
  // The read's own completing fusions come first (plain adds only).
  if (w->update->caps().plain_add) {
    for (const auto& candidate : ctx.read->CompletingFusions()) {
      if (GroupCompleting(candidate->completes()) != s.group) continue;
      Tensor x = ReadOutput(ctx, *w);
      SEAM_ASSIGN_OR_RETURN(bool done, candidate->TryComplete(w->c, w->r, x, g));
      if (!done) continue;
      w->owed = SumGroup::kNone;
      w->x_form = w->r_form;
      if (candidate->reads()) {
        w->x = x;
        return absl::OkStatus();
      }
      w->x = ReadOutput(ctx, *w);
      if (ctx.skip_empty_norm && w->r.rows() == 0) return absl::OkStatus();
      return ctx.read->Read(w->r, w->x);
    }
  }
  // Provider candidates complete a sum with a plain add and an add+norm read only.
  const NormParams* norm = ctx.read->add_norm();
  if (ctx.fusions != nullptr && norm != nullptr && w->update->caps().plain_add) {
    for (const auto& candidate : *ctx.fusions) {
      if (GroupCompleting(candidate->completes()) != s.group) continue;
      Tensor x = Tensor::Empty(w->r.shape(), w->r.dtype(), w->r.device());
      SEAM_ASSIGN_OR_RETURN(bool done, candidate->TryCompleteAddNorm(w->c, w->r, *norm, x, g));
      if (done) {
        w->x = x;
        w->x_form = w->r_form;
        w->owed = SumGroup::kNone;
        return absl::OkStatus();
      }
    }
  }
  if (!w->c.is_contiguous()) w->c = w->c.Clone();
  SEAM_RETURN_IF_ERROR(g.AllReduce(w->c));
  w->owed = SumGroup::kNone;
  return UpdateAndRead(ctx, w);
}

// The built-in gather a combined step falls back to (padded or variable, as the batch is).
Step BuiltInGather(const Step& s, const BatchRows& rows) {
  return Step{rows.padded() ? StepOp::kGather : StepOp::kGatherV, s.group, s.from, s.to};
}

// A read on the slice and the gather onto the DP rows: the read's gathering
// reads first, else the (update and) read, then the gather.
absl::Status ReadGather(const Step& s, const StepContext& ctx, PathWork* w) {
  SEAM_CHECK_MSG(ctx.read != nullptr, "entry path without a read");
  const BatchRows& rows = ctx.batch->rows;
  const bool update = s.op == StepOp::kUpdateReadGather;
  if (update && !w->update->caps().plain_add && StillOwed(ctx, *w)) {
    return absl::InternalError(absl::StrCat("the ", w->update->name(), " update cannot move before the sum over ",
                                            SumGroupName(w->owed), " completes"));
  }
  for (const auto& candidate : ctx.read->GatheringReads()) {
    GatheringReadArgs args;
    args.update = update ? w->update.get() : nullptr;
    args.contribution = update ? w->c : Tensor();
    args.residual = w->r;
    args.slice_counts = rows.AttnTpSliceCounts();
    args.out = Tensor::Empty({rows.RowsOf(s.to), ctx.read->InputWidth(w->r.dim(1))}, w->r.dtype(), w->r.device());
    args.group = &GroupComm(*ctx.comms, s.group);
    SEAM_ASSIGN_OR_RETURN(bool done, candidate->TryReadGather(args));
    if (!done) continue;
    w->x = args.out;
    w->x_form = s.to;
    if (update) w->c = Tensor();
    return absl::OkStatus();
  }
  SEAM_RETURN_IF_ERROR(RunStep(Step{update ? StepOp::kUpdateAndRead : StepOp::kRead}, ctx, w));
  return Gather(BuiltInGather(s, rows), ctx, w);
}

// RunStep's cases that move the residual or the contribution in place.
absl::Status InitResidual(const StepContext& ctx, PathWork* w) {
  if (ctx.read != nullptr) {
    SEAM_ASSIGN_OR_RETURN(w->r, ctx.read->InitResidual(w->c));
  } else {
    w->r = w->c.Clone();
  }
  w->r_form = w->c_form;
  w->c = Tensor();
  return absl::OkStatus();
}

absl::Status SliceResidual(const Step& s, const StepContext& ctx, PathWork* w) {
  const BatchRows& rows = ctx.batch->rows;
  if (s.to == RowForm::kCpRows) {
    SEAM_ASSIGN_OR_RETURN(w->r, TakeCpRows(w->r, rows));
  } else {
    w->r = w->r.Rows(rows.my_slice_begin(), rows.my_slice_rows());
  }
  w->r_form = s.to;
  return absl::OkStatus();
}

absl::Status TakeRows(const Step& s, const StepContext& ctx, PathWork* w) {
  const BatchRows& rows = ctx.batch->rows;
  if (s.to == RowForm::kCpRows) {
    SEAM_ASSIGN_OR_RETURN(w->c, TakeCpRows(w->c, rows));
    w->c_form = s.to;
    return absl::OkStatus();
  }
  const RowForm from = s.from == RowForm::kFfnRows && rows.topology().attn_dp == 1 ? RowForm::kDpRows : s.from;
  w->c = w->c.Rows(OwnOffset(from, s.to, rows), rows.RowsOf(s.to));
  w->c_form = s.to;
  return absl::OkStatus();
}

absl::Status WriteResidual(PathWork* w) {
  w->r = w->c;
  w->r_form = w->c_form;
  w->c = Tensor();
  w->wrote_residual = true;
  return absl::OkStatus();
}

absl::Status ApplyUpdate(const StepContext& ctx, PathWork* w) {
  if (StillOwed(ctx, *w)) {
    return absl::InternalError(absl::StrCat("the ", w->update->name(), " update cannot move before the sum over ",
                                            SumGroupName(w->owed), " completes"));
  }
  SEAM_RETURN_IF_ERROR(w->update->Apply(w->c, w->r));
  w->c = Tensor();
  w->wrote_residual = true;
  return absl::OkStatus();
}

absl::Status Read(const StepContext& ctx, PathWork* w) {
  SEAM_CHECK_MSG(ctx.read != nullptr, "entry path without a read");
  w->x = ReadOutput(ctx, *w);
  w->x_form = w->r_form;
  if (ctx.skip_empty_norm && w->r.rows() == 0) return absl::OkStatus();
  return ctx.read->Read(w->r, w->x);
}

absl::Status ReadGathered(const StepContext& ctx, PathWork* w) {
  SEAM_CHECK_MSG(ctx.read != nullptr, "entry path without a read");
  const Tensor moved = w->x;
  w->x = Tensor::Empty({moved.rows(), ctx.read->InputWidth(moved.dim(1))}, moved.dtype(), moved.device());
  if (ctx.skip_empty_norm && moved.rows() == 0) return absl::OkStatus();
  return ctx.read->Read(moved, w->x);
}

absl::Status RunStep(const Step& s, const StepContext& ctx, PathWork* w) {
  switch (s.op) {
    case StepOp::kInitResidual:
      return InitResidual(ctx, w);
    case StepOp::kSliceResidual:
      return SliceResidual(s, ctx, w);
    case StepOp::kAllReduce:
      if (!w->c.is_contiguous()) w->c = w->c.Clone();
      SEAM_RETURN_IF_ERROR(GroupComm(*ctx.comms, s.group).AllReduce(w->c));
      w->owed = SumGroup::kNone;
      return absl::OkStatus();
    case StepOp::kReduceScatter:
    case StepOp::kReduceScatterV:
      return Scatter(s, ctx, w);
    case StepOp::kTakeRows:
      return TakeRows(s, ctx, w);
    case StepOp::kAddBeforeSum:
      return AddBeforeSum(ctx, w);
    case StepOp::kWriteResidual:
      return WriteResidual(w);
    case StepOp::kFusedInput:
      return FusedInput(s, ctx, w);
    case StepOp::kApplyUpdate:
      return ApplyUpdate(ctx, w);
    case StepOp::kUpdateAndRead:
      return UpdateAndRead(ctx, w);
    case StepOp::kRead:
      return Read(ctx, w);
    case StepOp::kGather:
    case StepOp::kGatherV:
      return Gather(s, ctx, w);
    case StepOp::kReadGather:
    case StepOp::kUpdateReadGather:
      return ReadGather(s, ctx, w);
    case StepOp::kGatherResidual:
      w->x = w->r;
      w->x_form = w->r_form;
      return Gather(BuiltInGather(s, ctx.batch->rows), ctx, w);
    case StepOp::kReadGathered:
      return ReadGathered(ctx, w);
  }
  return absl::InternalError("unknown step");
}

}  // namespace

absl::Status RunSteps(const std::vector<Step>& steps, const StepContext& ctx, PathWork* work) {
  for (const Step& s : steps) {
    absl::Status st = RunStep(s, ctx, work);
    if (!st.ok()) return Annotate(st, absl::StrCat("boundary step ", s.ToString()));
  }
  return absl::OkStatus();
}

}  // namespace seam::boundary
