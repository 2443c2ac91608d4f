// Checks of what the coordinator sends a stage: a StageConfig before anything
// is loaded, and each MicrobatchDescriptor before anything is computed. Every
// error names the offending field.
#pragma once

#include <cstdint>
#include <optional>

#include "absl/status/status.h"
#include "seam/v1/stage_service.pb.h"
#include "seam/weights/model_config.h"

namespace seam::server {

// Sizes, ranks and neighbours of `config` alone. INVALID_ARGUMENT.
absl::Status CheckStageConfig(const v1::StageConfig& config);

// The layer range and TP sizes against the checkpoint's config. INVALID_ARGUMENT.
absl::Status CheckStageConfigAgainstModel(const v1::StageConfig& config, const weights::ModelConfig& model);

// Whether `descriptor` belongs to this stage's stream: its epoch equals
// `epoch` and its sequence number follows `last_sequence_number` (none yet
// when unset). FAILED_PRECONDITION naming epoch or sequence_number.
absl::Status CheckDescriptorOrder(const v1::MicrobatchDescriptor& descriptor, uint64_t epoch,
                                  std::optional<uint64_t> last_sequence_number);

// The descriptor's contents: at least one sequence, distinct sequence ids,
// non-empty token lists, token ids in [0, vocab). INVALID_ARGUMENT.
absl::Status CheckDescriptorContents(const v1::MicrobatchDescriptor& descriptor, int64_t vocab);

}  // namespace seam::server
