// The bodies of POST /v1/completions and /v1/chat/completions, read into the
// GenerateRequest the gRPC API would get: prompts as text (tokenized with
// the checkpoint's tokenizer) or token ids, chat messages rendered with its
// chat template, OpenAI's sampling fields mapped onto SamplingParams (stop
// strings, penalties, logit_bias, log-probs, seed; vLLM's top_k, min_tokens,
// repetition_penalty, stop_token_ids, ignore_eos). A chat without max_tokens
// may generate up to the context limit (limits.max_positions), a completion
// 16 tokens (OpenAI's default). What seam does not do is refused by name
// (openai_fields.h) rather than ignored. Every refusal is INVALID_ARGUMENT
// (or FAILED_PRECONDITION when the model lacks a tokenizer or chat template).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "service/model_text.h"
#include "service/request_validation.h"

namespace seam::coordinator::http {

struct OpenAiRequest {
  bool chat = false;
  bool stream = false;
  bool include_usage = false;     // stream_options.include_usage
  int n = 1;                      // choices per prompt
  std::string model;              // as the client named it ("" if absent)
  // One prompt per choice: prompt p's choice j is prompts[p * n + j].
  v1::GenerateRequest generate;
  std::vector<int> prompt_tokens;  // per distinct prompt
  // Log-probs in the answer (generate.sampling says the same): the chosen
  // token's, and of the top_logprobs most likely at each step.
  bool logprobs = false;
  int top_logprobs = 0;
};

// `body` of a completion (chat = false) or chat completion (chat = true)
// request, `request_id` as the driver will know it. `text` may be null (no
// tokenizer): then only token-id prompts are served.
absl::StatusOr<OpenAiRequest> ParseOpenAiRequest(const std::string& body, bool chat, const std::string& request_id,
                                                 const ModelText* text, const RequestLimits& limits);

}  // namespace seam::coordinator::http
