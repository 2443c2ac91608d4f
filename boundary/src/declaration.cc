#include "seam/boundary/declaration.h"

#include "absl/strings/str_cat.h"

namespace seam::boundary {

const char* StageKindName(StageKind kind) { return kind == StageKind::kAttention ? "attention" : "ffn"; }

const char* ProducerReductionName(ProducerReduction r) {
  return r == ProducerReduction::kAlwaysPartial ? "ALWAYS_PARTIAL" : "EXIT_SCOPED";
}

SumGroup StageDeclaration::owed_sum() const {
  if (kind == StageKind::kAttention) return SumGroup::kAttnTp;
  if (output_complete) return SumGroup::kNone;
  return sparse ? SumGroup::kMoeOutput : SumGroup::kTp;
}

std::string StageDeclaration::ToString() const {
  if (kind == StageKind::kAttention) {
    return absl::StrCat(is_mixer() ? "mixer" : "attention", "(", ProducerReductionName(reduction),
                        gathers_attn_tp_input ? "" : ", no attn-TP gather", ")");
  }
  return absl::StrCat("ffn(", sparse ? "sparse" : "dense", output_complete ? ", output complete" : "",
                      merges_branch ? ", merges a branch" : "", ", EXIT_SCOPED)");
}

StageDeclaration DeclareAttn(AttnDeclOptions options) {
  StageDeclaration d;
  d.kind = StageKind::kAttention;
  d.reduction = options.reduction;
  d.gathers_attn_tp_input = options.gathers_attn_tp_input;
  return d;
}

StageDeclaration DeclareFfn(FfnDeclOptions options) {
  StageDeclaration d;
  d.kind = StageKind::kFfn;
  d.reduction = ProducerReduction::kExitScoped;
  d.sparse = options.sparse;
  d.output_complete = options.output_complete;
  d.merges_branch = options.merges_branch;
  d.defers_only_with_provider = options.defers_only_with_provider;
  return d;
}

absl::Status ValidateOptions(StageKind kind, const StageOptions& options) {
  if (kind == StageKind::kFfn && options.qkv_latent) {
    return absl::InvalidArgumentError("an ffn stage does not take the option qkv_latent (it takes only fusions)");
  }
  return absl::OkStatus();
}

}  // namespace seam::boundary
