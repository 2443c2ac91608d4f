#include "seam/boundary/variant_choice.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace seam::boundary {

absl::StatusOr<VariantChoiceOptions> ParseVariantChoice(const std::string& text) {
  VariantChoiceOptions options;
  if (text == "auto") return options;
  auto variant = ParseBatchVariant(text);
  if (!variant.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "unknown batch variant '", text, "' (auto, ordinary, unpadded, input-scattered, sequence-parallel)"));
  }
  if (*variant == BatchVariant::kSequenceParallel) {
    options.mode = VariantMode::kSequenceParallel;
  } else {
    options.mode = VariantMode::kFixed;
    options.fixed = *variant;
  }
  return options;
}

std::string VariantChoiceName(const VariantChoiceOptions& options) {
  switch (options.mode) {
    case VariantMode::kAuto: return absl::StrCat("auto (input-scattered from ", options.scatter_input_rows, " rows)");
    case VariantMode::kSequenceParallel: return "sequence-parallel";
    case VariantMode::kFixed: return BatchVariantName(options.fixed);
  }
  return "?";
}

absl::Status ValidateVariantChoice(const VariantChoiceOptions& options, const Topology& topology) {
  if (options.mode != VariantMode::kFixed) return absl::OkStatus();
  if (options.fixed == BatchVariant::kContextParallel) {
    return absl::InvalidArgumentError("context-parallel batches are not served yet");
  }
  if (options.fixed == BatchVariant::kUnpadded && topology.attn_dp > 1) {
    return absl::InvalidArgumentError("unpadded batches are served without attention DP only");
  }
  return absl::OkStatus();
}

BatchVariant ChooseBatchVariant(const VariantChoiceOptions& options, const Topology& topology,
                                const std::vector<int64_t>& dp_rows) {
  switch (options.mode) {
    case VariantMode::kFixed: return options.fixed;
    case VariantMode::kSequenceParallel: return BatchVariant::kSequenceParallel;
    case VariantMode::kAuto: break;
  }
  const int attn_tp = topology.attn_tp();
  if (topology.tp == 1 || dp_rows.empty()) return BatchVariant::kOrdinary;
  if (topology.attn_dp == 1 && attn_tp > 1 && dp_rows[0] % attn_tp != 0) return BatchVariant::kUnpadded;
  const int64_t largest = *std::max_element(dp_rows.begin(), dp_rows.end());
  if (attn_tp > 1 && largest >= options.scatter_input_rows) return BatchVariant::kInputScattered;
  return BatchVariant::kOrdinary;
}

}  // namespace seam::boundary
