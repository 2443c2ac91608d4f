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
  // Entries of sampling.stop_token_ids, also sent to the last stage (masked
  // until min_tokens).
  int64_t max_stop_tokens = 64;
  // The longest context the pipeline serves (PipelineLimits::max_context:
  // the model's positions, no more than the stages' KV holds): what an API
  // advertises (the OpenAI API's max_model_len). 0: unknown.
  int64_t max_context = 0;
  // sampling.stop strings, and the bytes of each (the coordinator matches them).
  int64_t max_stop_strings = 16;
  int64_t max_stop_string_bytes = 256;
  // sampling.logit_bias entries (sent to the last stage with each sequence).
  int64_t max_logit_bias = 300;
  // sampling.top_logprobs (OpenAI's chat limit).
  int64_t max_top_logprobs = 20;
};

// The limits the server enforces on one sequence, as /v1/models and
// GetMetadata state them. Read from here only: once the stages report what
// bounds them (StageStatus) and the coordinator derives its limits from
// that, this is the one place to point at the derived figures.
struct ServingLimits {
  int64_t max_model_len = 0;       // prompt + generated tokens of one sequence
  int64_t max_prompt_tokens = 0;   // tokens of one prompt (prefilled whole in one microbatch)
  int64_t default_max_tokens = 0;  // a completion without max_tokens (a chat: up to max_model_len)
};
ServingLimits ServingLimitsOf(const RequestLimits& limits);

// What GetMetadata answers as Metadata.limits: the sequence's limits
// (ServingLimitsOf) and every per-request limit ValidateGenerateRequest and
// ValidateScoreRequest enforce (prompts, request_id, stop tokens and
// strings, logit biases, top log-probs, cache salt), so that a client shapes
// its requests by what this server refuses.
v1::ServingLimits ServingLimitsMessage(const RequestLimits& limits);

// The largest serialized MicrobatchDescriptor the coordinator can build under
// `limits` with at most `max_sequences` sequences and `max_tokens` tokens
// (and as many finished sequence ids as sequences): request ids, tokens,
// sampling and the fields of each entry. Checked against the least
// StageStatus.max_descriptor_bytes of the stages at start-up.
uint64_t DescriptorBound(const RequestLimits& limits, int max_sequences, int max_tokens);

// max_new_tokens after the server default is applied.
int64_t ResolvedMaxNewTokens(const v1::SamplingParams& sampling, const RequestLimits& limits);

// Longest GenerateRequest.cache_salt (bytes).
inline constexpr size_t kMaxCacheSaltBytes = 256;

// Sizes, token ids and the sampling's ranges: temperature >= 0, top_p in
// [0, 1], top_k within the vocabulary, presence and frequency penalties in
// [-2, 2], repetition_penalty 0 (off) or in (0, 10], logit_bias on distinct
// tokens of the vocabulary with biases in [-100, 100], min_tokens at most
// max_new_tokens, top_logprobs at most limits.max_top_logprobs, and every
// count and length within `limits`. INVALID_ARGUMENT naming the field.
absl::Status ValidateGenerateRequest(const v1::GenerateRequest& request, const RequestLimits& limits);

// What needs the model's tokenizer: stop strings are matched in the decoded
// text. FAILED_PRECONDITION when the request has some and there is none.
absl::Status ValidateTextSampling(const v1::GenerateRequest& request, bool has_tokenizer);

// Each scored sequence needs at least 2 tokens (the first one has no log-prob).
absl::Status ValidateScoreRequest(const v1::ScoreRequest& request, const RequestLimits& limits);

}  // namespace seam::coordinator
