#include "batch_variant_log.h"

#include "absl/strings/str_join.h"
#include "seam/core/logging.h"

namespace seam::runtime {

void BatchVariantLog::Note(uint64_t microbatch, boundary::BatchVariant variant,
                           const boundary::VariantChoiceOptions& choice, const std::vector<int64_t>& dp_rows,
                           bool graph) {
  const std::string rows = absl::StrJoin(dp_rows, ",");
  const size_t index = static_cast<size_t>(variant);
  if (!graph && index < seen_.size() && !seen_[index]) {
    seen_[index] = true;
    SEAM_LOG_INFO("batch variant {}: first used at step {} (rows per DP group {}; variant choice {})",
                  boundary::BatchVariantName(variant), microbatch, rows, boundary::VariantChoiceName(choice));
  }
  SEAM_LOG_DEBUG("step {}: batch variant {}, rows per DP group {}, {}", microbatch,
                 boundary::BatchVariantName(variant), rows, graph ? "CUDA graph" : "eager");
}

}  // namespace seam::runtime
