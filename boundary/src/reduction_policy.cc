#include "seam/boundary/reduction_policy.h"

#include "absl/strings/str_cat.h"

namespace seam::boundary {

const char* ReductionPolicyName(ReductionPolicy policy) {
  switch (policy) {
    case ReductionPolicy::kAr: return "ar";
    case ReductionPolicy::kRs: return "rs";
    case ReductionPolicy::kRsv: return "rsv";
    case ReductionPolicy::kRsRsv: return "rs+rsv";
    case ReductionPolicy::kAuto: return "auto";
  }
  return "?";
}

absl::StatusOr<ReductionPolicy> ParseReductionPolicy(const std::string& text) {
  for (ReductionPolicy p : {ReductionPolicy::kAr, ReductionPolicy::kRs, ReductionPolicy::kRsv,
                            ReductionPolicy::kRsRsv, ReductionPolicy::kAuto}) {
    if (text == ReductionPolicyName(p)) return p;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown reduction policy '", text, "' (expected ar, rs, rsv, rs+rsv or auto)"));
}

ReductionPolicy ResolveReductionPolicy(ReductionPolicy policy, const std::string& architecture) {
  if (policy != ReductionPolicy::kAuto) return policy;
  // Dense FFNs gain from either scatter; MoE outputs favour the attention-DP
  // return, where the expert sum already lands on every rank's own tokens.
  if (architecture == "qwen3") return ReductionPolicy::kRsRsv;
  if (architecture == "qwen3_moe") return ReductionPolicy::kRsv;
  return ReductionPolicy::kAr;
}

}  // namespace seam::boundary
