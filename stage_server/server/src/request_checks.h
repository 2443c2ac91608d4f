// Checks of what the coordinator sends a stage: a StageConfig before anything
// is loaded, and each MicrobatchDescriptor before anything is computed. Every
// error names the offending field.
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "seam/core/dtype.h"
#include "seam/v1/stage_service.pb.h"
#include "seam/weights/model_config.h"

namespace seam::server {

// Sizes, ranks and neighbours of `config` alone. INVALID_ARGUMENT.
absl::Status CheckStageConfig(const v1::StageConfig& config);

// The layer range and TP sizes against the checkpoint's config. INVALID_ARGUMENT.
absl::Status CheckStageConfigAgainstModel(const v1::StageConfig& config, const weights::ModelConfig& model);

// Whether `descriptor` is the next of this stage's stream: its epoch equals
// `epoch` and its sequence number is exactly `last_sequence_number` + 1 (an
// epoch starts at 1, so 0 means none run yet). FAILED_PRECONDITION naming
// epoch or sequence_number; the caller then leaves its counter where it is.
absl::Status CheckDescriptorOrder(const v1::MicrobatchDescriptor& descriptor, uint64_t epoch,
                                  uint64_t last_sequence_number);

// Size limits of what reaches a stage, from its largest legal step.
// Entries of one SequenceEntry beyond its tokens: request_id, ids, flags and
// sampling parameters (the coordinator bounds each: request ids at most
// kMaxRequestIdBytes, stop tokens at most kMaxStopTokens).
inline constexpr uint64_t kMaxRequestIdBytes = 128;
inline constexpr uint64_t kMaxStopTokens = 64;
// A sequence's sampling (the last stage's): logit_bias entries, tokens
// masked until min_tokens (its stop tokens and EOS), top log-probs.
inline constexpr int kMaxLogitBias = 300;
inline constexpr int kMaxMaskedTokens = kMaxStopTokens + 8;
inline constexpr int kMaxTopLogprobs = 20;
// The largest serialized MicrobatchDescriptor of a step of `max_step_tokens`
// tokens (at most that many sequences, and that many finished sequence ids):
// the stage's gRPC receive limit.
uint64_t MaxDescriptorBytes(int64_t max_step_tokens);
// The most payload bytes one handoff may list: every rank's hidden and
// residual rows (at most max_step_tokens per DP group) in `dtype`.
uint64_t MaxHandoffPayloadBytes(const weights::ModelConfig& model, int tp, int attn_dp, DType dtype,
                                int64_t max_step_tokens);

// The descriptor's contents: at least one sequence, distinct sequence ids,
// non-empty token lists, token ids in [0, vocab); sampling with finite
// values in range, at most kMaxLogitBias biases on distinct tokens, at most
// kMaxMaskedTokens masked tokens, top_logprobs at most kMaxTopLogprobs, every
// token it names in [0, vocab). INVALID_ARGUMENT naming the field.
absl::Status CheckDescriptorContents(const v1::MicrobatchDescriptor& descriptor, int64_t vocab);

}  // namespace seam::server
