#include "seam/boundary/layout.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace seam::boundary {

const char* TokenAxisName(TokenAxis axis) {
  switch (axis) {
    case TokenAxis::kAttnDp: return "ATTN_DP";
    case TokenAxis::kAttnCp: return "ATTN_CP";
    case TokenAxis::kAttnTp: return "ATTN_TP";
  }
  return "?";
}

const char* RowFormName(RowForm form) {
  switch (form) {
    case RowForm::kDpRows: return "dp_rows";
    case RowForm::kAttnTpSlice: return "attn_tp_slice";
    case RowForm::kFfnRows: return "ffn_rows";
    case RowForm::kCpRows: return "cp_rows";
  }
  return "?";
}

const char* SumGroupName(SumGroup group) {
  switch (group) {
    case SumGroup::kNone: return "none";
    case SumGroup::kAttnTp: return "ATTN_TP";
    case SumGroup::kTp: return "TP";
    case SumGroup::kMoeOutput: return "MOE_OUTPUT";
  }
  return "?";
}

absl::StatusOr<Topology> Topology::Make(int tp, int attn_dp, int tp_rank, int attn_cp) {
  if (tp < 1 || attn_dp < 1 || attn_cp < 1) {
    return absl::InvalidArgumentError(absl::StrCat("tp (", tp, "), attn_dp (", attn_dp, ") and attn_cp (", attn_cp,
                                                   ") must be at least 1"));
  }
  if (tp % attn_dp != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("attention-DP size ", attn_dp, " does not divide TP size ", tp));
  }
  if (attn_cp > 1 && attn_dp > 1) {
    return absl::InvalidArgumentError(absl::StrCat("context parallelism (attn_cp ", attn_cp,
                                                   ") is served without attention DP; attn_dp is ", attn_dp));
  }
  if ((tp / attn_dp) % attn_cp != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("context-parallel size ", attn_cp, " does not divide the attention's TP size ", tp / attn_dp));
  }
  if (tp_rank < 0 || tp_rank >= tp) {
    return absl::InvalidArgumentError(absl::StrCat("TP rank ", tp_rank, " outside [0, ", tp, ")"));
  }
  return Topology{tp, attn_dp, tp_rank, attn_cp};
}

std::string Topology::ToString() const {
  if (attn_cp > 1) {
    return absl::StrCat("tp=", tp, " attn_dp=", attn_dp, " attn_cp=", attn_cp, " attn_tp=", attn_tp(),
                        " rank=", tp_rank, " (dp ", dp_rank(), ", cp ", cp_rank(), ", attn_tp ", attn_tp_rank(), ")");
  }
  return absl::StrCat("tp=", tp, " attn_dp=", attn_dp, " attn_tp=", attn_tp(), " rank=", tp_rank, " (dp ",
                      dp_rank(), ", attn_tp ", attn_tp_rank(), ")");
}

Layout Layout::Of(RowForm form, const Topology& t) {
  Layout layout;
  if (form == RowForm::kFfnRows) return layout;
  if (t.attn_dp > 1) layout.sharded.push_back(TokenAxis::kAttnDp);
  if (form == RowForm::kCpRows && t.attn_cp > 1) layout.sharded.push_back(TokenAxis::kAttnCp);
  if (form == RowForm::kAttnTpSlice && t.attn_tp() > 1) layout.sharded.push_back(TokenAxis::kAttnTp);
  return layout;
}

std::string Layout::ToString() const {
  std::vector<std::string> names;
  for (TokenAxis a : sharded) names.push_back(TokenAxisName(a));
  return absl::StrCat("[", absl::StrJoin(names, ", "), "]");
}

int SumGroupSize(SumGroup group, const Topology& t) {
  switch (group) {
    case SumGroup::kNone: return 1;
    case SumGroup::kAttnTp: return t.attn_tp();
    case SumGroup::kTp:
    case SumGroup::kMoeOutput: return t.tp;
  }
  return 1;
}

}  // namespace seam::boundary
