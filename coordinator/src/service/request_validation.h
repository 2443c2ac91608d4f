// Checks of client requests before they reach the scheduler: every refusal is
// INVALID_ARGUMENT with a message naming the request, the prompt and what is
// wrong (empty prompt, token outside the vocabulary, too many tokens).
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "seam/v1/coordinator_service.pb.h"

namespace seam::coordinator {

struct RequestLimits {
  int64_t vocab_size = 0;
  // prompt + generated tokens of one sequence (the model's positions).
  int64_t max_positions = 0;
  // Tokens one microbatch holds: a prompt is prefilled whole, so it must fit.
  int64_t max_prompt_tokens = 0;
  // Used when SamplingParams.max_new_tokens is 0.
  int64_t default_max_new_tokens = 16;
  // Prompts (sequences) one request may carry; checked before anything is
  // built per prompt.
  int64_t max_prompts = 64;
  // Bytes of request_id, which travels in every descriptor of the request.
  int64_t max_request_id_bytes = 128;
  // Entries of sampling.stop_token_ids, also copied into every descriptor.
  int64_t max_stop_tokens = 64;
  // The longest context the pipeline serves (PipelineLimits::max_context:
  // the model's positions, no more than the stages' KV holds): what an API
  // advertises (the OpenAI API's max_model_len). 0: unknown.
  int64_t max_context = 0;
};

// The largest serialized MicrobatchDescriptor the coordinator can build under
// `limits` with at most `max_sequences` sequences and `max_tokens` tokens
// (and as many finished sequence ids as sequences): request ids, tokens,
// sampling and the fields of each entry. Checked against the least
// StageStatus.max_descriptor_bytes of the stages at start-up.
uint64_t DescriptorBound(const RequestLimits& limits, int max_sequences, int max_tokens);

// max_new_tokens after the server default is applied.
int64_t ResolvedMaxNewTokens(const v1::SamplingParams& sampling, const RequestLimits& limits);

absl::Status ValidateGenerateRequest(const v1::GenerateRequest& request, const RequestLimits& limits);

// Each scored sequence needs at least 2 tokens (the first one has no log-prob).
absl::Status ValidateScoreRequest(const v1::ScoreRequest& request, const RequestLimits& limits);

}  // namespace seam::coordinator
