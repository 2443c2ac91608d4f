// Names and printing of plan steps, and the small lookups on bound paths.
#include "absl/strings/str_cat.h"
#include "seam/boundary/plan.h"

namespace seam::boundary {

const char* CommGroupName(CommGroup group) {
  switch (group) {
    case CommGroup::kNone: return "none";
    case CommGroup::kTp: return "tp";
    case CommGroup::kAttnTp: return "attn_tp";
    case CommGroup::kAttnDp: return "attn_dp";
    case CommGroup::kAttnCp: return "attn_cp";
  }
  return "?";
}

CommGroup GroupCompleting(SumGroup sum) {
  switch (sum) {
    case SumGroup::kNone: return CommGroup::kNone;
    case SumGroup::kAttnTp: return CommGroup::kAttnTp;
    case SumGroup::kTp:
    case SumGroup::kMoeOutput: return CommGroup::kTp;
  }
  return CommGroup::kNone;
}

const char* StepOpName(StepOp op) {
  switch (op) {
    case StepOp::kInitResidual: return "init_residual";
    case StepOp::kSliceResidual: return "slice_residual";
    case StepOp::kAllReduce: return "all_reduce";
    case StepOp::kReduceScatter: return "reduce_scatter";
    case StepOp::kReduceScatterV: return "reduce_scatterv";
    case StepOp::kTakeRows: return "take_rows";
    case StepOp::kAddBeforeSum: return "add_residual_before_sum";
    case StepOp::kWriteResidual: return "write_residual";
    case StepOp::kFusedInput: return "fused_all_reduce_add_norm";
    case StepOp::kUpdateAndRead: return "add_norm";
    case StepOp::kRead: return "norm";
    case StepOp::kGather: return "all_gather";
    case StepOp::kGatherV: return "all_gatherv";
    case StepOp::kApplyUpdate: return "apply_update";
    case StepOp::kReadGather: return "gathering_read";
    case StepOp::kUpdateReadGather: return "gathering_add_norm";
    case StepOp::kGatherResidual: return "gather_residual";
    case StepOp::kReadGathered: return "norm_gathered";
  }
  return "?";
}

bool Step::issues_collective() const {
  switch (op) {
    case StepOp::kAllReduce:
    case StepOp::kReduceScatter:
    case StepOp::kReduceScatterV:
    case StepOp::kFusedInput:
    case StepOp::kGather:
    case StepOp::kGatherV:
    case StepOp::kReadGather:
    case StepOp::kUpdateReadGather:
    case StepOp::kGatherResidual: return true;
    default: return false;
  }
}

std::string Step::ToString() const {
  std::string s = StepOpName(op);
  const bool moves = op == StepOp::kReduceScatter || op == StepOp::kReduceScatterV || op == StepOp::kTakeRows ||
                     op == StepOp::kGather || op == StepOp::kGatherV || op == StepOp::kSliceResidual ||
                     op == StepOp::kReadGather || op == StepOp::kUpdateReadGather || op == StepOp::kGatherResidual;
  if (group != CommGroup::kNone || moves) {
    absl::StrAppend(&s, "(");
    if (group != CommGroup::kNone) absl::StrAppend(&s, CommGroupName(group));
    if (moves) {
      absl::StrAppend(&s, group != CommGroup::kNone ? ": " : "", RowFormName(from), "->", RowFormName(to));
    }
    absl::StrAppend(&s, ")");
  }
  return s;
}

bool IncomingForm::operator==(const IncomingForm& o) const {
  if (state != o.state) return false;
  switch (state) {
    case StreamState::kInitial: return rows == o.rows;
    case StreamState::kWritten: return residual == o.residual;
    case StreamState::kPending: return rows == o.rows && owed == o.owed && residual == o.residual;
  }
  return false;
}

std::string IncomingForm::ToString() const {
  switch (state) {
    case StreamState::kInitial: return absl::StrCat("initial(input on ", RowFormName(rows), ")");
    case StreamState::kWritten: return absl::StrCat("written(residual on ", RowFormName(residual), ")");
    case StreamState::kPending:
      return absl::StrCat("pending(", RowFormName(rows), ", owes ", SumGroupName(owed), ", residual on ",
                          RowFormName(residual), ")");
  }
  return "?";
}

const char* ExitChoiceName(ExitChoice choice) {
  switch (choice) {
    case ExitChoice::kRegisterPartial: return "register_partial";
    case ExitChoice::kLeaveToNextInput: return "leave_to_next_input";
    case ExitChoice::kCompleteAllReduce: return "complete_now";
    case ExitChoice::kReduceScatterV: return "reduce_scatterv_back";
    case ExitChoice::kReduceScatterFixed: return "reduce_scatter_back";
    case ExitChoice::kReduceScatterCp: return "reduce_scatter_cp_back";
    case ExitChoice::kDeferFinalize: return "defer_moe_finalize_to_final_norm";
  }
  return "?";
}

const EntryPath* VariantPaths::FindEntry(const IncomingForm& incoming) const {
  for (const EntryPath& e : entries) {
    if (e.incoming == incoming) return &e;
  }
  return nullptr;
}

const EntryPath* VariantPaths::FindFinalRead(const IncomingForm& incoming) const {
  for (const EntryPath& e : final_read) {
    if (e.incoming == incoming) return &e;
  }
  return nullptr;
}

const VariantPaths* StagePlan::Find(BatchVariant variant) const {
  for (const VariantPaths& v : variants) {
    if (v.variant == variant) return &v;
  }
  return nullptr;
}

}  // namespace seam::boundary
