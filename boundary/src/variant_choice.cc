#include "seam/boundary/variant_choice.h"

#include <algorithm>
#include <limits>
#include <string>

#include "absl/strings/str_cat.h"

namespace seam::boundary {

absl::StatusOr<VariantChoiceOptions> ParseVariantChoice(const std::string& text) {
  VariantChoiceOptions options;
  if (text == "auto") return options;
  auto variant = ParseBatchVariant(text);
  if (!variant.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "unknown batch variant '", text,
        "' (auto, ordinary, unpadded, input-scattered, sequence-parallel, context-parallel)"));
  }
  if (*variant == BatchVariant::kSequenceParallel) {
    options.mode = VariantMode::kSequenceParallel;
  } else if (*variant == BatchVariant::kContextParallel) {
    options.mode = VariantMode::kContextParallel;
  } else {
    options.mode = VariantMode::kFixed;
    options.fixed = *variant;
  }
  return options;
}

std::string VariantChoiceName(const VariantChoiceOptions& options) {
  switch (options.mode) {
    case VariantMode::kAuto:
      return absl::StrCat("auto (",
                          options.scatter_input_rows == std::numeric_limits<int64_t>::max()
                              ? std::string("never input-scattered")
                              : absl::StrCat("input-scattered from ", options.scatter_input_rows, " rows"),
                          "; context-parallel prefill from ", options.cp_min_rows, " rows with CP ranks)");
    case VariantMode::kSequenceParallel: return "sequence-parallel";
    case VariantMode::kContextParallel: return "context-parallel (every prefill)";
    case VariantMode::kFixed: return BatchVariantName(options.fixed);
  }
  return "?";
}

absl::Status ValidateVariantChoice(const VariantChoiceOptions& options, const Topology& topology) {
  const bool fixed = options.mode == VariantMode::kFixed;
  const bool cp = options.mode == VariantMode::kContextParallel ||
                  (fixed && options.fixed == BatchVariant::kContextParallel);
  if (cp && topology.attn_dp > 1) {
    return absl::InvalidArgumentError(absl::StrCat("context-parallel batches are served without attention DP; "
                                                   "attn_dp is ", topology.attn_dp));
  }
  const bool scattered = options.mode == VariantMode::kSequenceParallel ||
                         (fixed && (options.fixed == BatchVariant::kInputScattered ||
                                    options.fixed == BatchVariant::kSequenceParallel));
  if (scattered && topology.attn_cp > 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "input-scattered and sequence-parallel batches are not served with context-parallel ranks (attn_cp ",
        topology.attn_cp, ")"));
  }
  if (!fixed) return absl::OkStatus();
  if (options.fixed == BatchVariant::kUnpadded && topology.attn_dp > 1) {
    return absl::InvalidArgumentError("unpadded batches are served without attention DP only");
  }
  return absl::OkStatus();
}

BatchVariant ChooseBatchVariant(const VariantChoiceOptions& options, const Topology& topology,
                                const std::vector<int64_t>& dp_rows, bool prefill) {
  switch (options.mode) {
    case VariantMode::kFixed: return options.fixed;
    case VariantMode::kSequenceParallel: return BatchVariant::kSequenceParallel;
    case VariantMode::kContextParallel:
      if (prefill) return BatchVariant::kContextParallel;
      break;
    case VariantMode::kAuto: break;
  }
  const int attn_tp = topology.attn_tp();
  if (topology.tp == 1 || dp_rows.empty()) return BatchVariant::kOrdinary;
  const int64_t largest = *std::max_element(dp_rows.begin(), dp_rows.end());
  if (topology.attn_cp > 1 && prefill && largest >= options.cp_min_rows) return BatchVariant::kContextParallel;
  if (topology.attn_dp == 1 && attn_tp > 1 && dp_rows[0] % attn_tp != 0) return BatchVariant::kUnpadded;
  if (topology.attn_cp > 1) return BatchVariant::kOrdinary;
  if (attn_tp > 1 && largest >= options.scatter_input_rows) return BatchVariant::kInputScattered;
  return BatchVariant::kOrdinary;
}

}  // namespace seam::boundary
