// The JSON of OpenAI's answers: a whole completion or chat completion, and
// the chunks of a streamed one (each sent as a server-sent event "data: ...").
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "http/openai_request.h"
#include "seam/v1/sampling.pb.h"
#include "service/model_text.h"
#include "seam/coordinator/scheduler_types.h"

namespace seam::coordinator::http {

// Names the answer: its id, when it was made, the served model.
struct AnswerHeader {
  std::string id;
  int64_t created = 0;  // Unix seconds
  std::string model;
};

// "stop" (a stop token or string), "length" (max_tokens) or null (not finished).
nlohmann::json FinishReasonJson(std::optional<FinishReason> reason);

nlohmann::json UsageJson(int64_t prompt_tokens, int64_t completion_tokens);

// One choice's output: the whole of it, or the part one chunk carries.
struct ChoiceOutput {
  std::string text;
  std::vector<v1::ChosenTokenLogprobs> logprobs;  // one per token, when the request asks
  std::optional<FinishReason> finish;
};

// The "logprobs" of a choice's tokens in the form of the request's
// endpoint; null when it asks for none. Completions: tokens,
// token_logprobs, top_logprobs (token text to log-prob) and text_offset,
// the offsets in characters from *offset (advanced past these tokens).
// Chat: content, one entry per token with its bytes and top_logprobs.
// Token texts come from `text` (empty without a tokenizer).
nlohmann::json LogprobsJson(const OpenAiRequest& request, const ModelText* text,
                            const std::vector<v1::ChosenTokenLogprobs>& logprobs, int64_t* offset);

// The non-streamed answer: one choice per sequence of `request`.
nlohmann::json CompletionJson(const OpenAiRequest& request, const AnswerHeader& header,
                              const std::vector<ChoiceOutput>& choices, int64_t completion_tokens,
                              const ModelText* text);

// One streamed chunk of choice `index`: `part`'s text (for a chat, the
// delta's content; `role` adds the delta's role), its log-probs, its finish.
nlohmann::json ChunkJson(const OpenAiRequest& request, const AnswerHeader& header, int index,
                         const ChoiceOutput& part, bool role, const ModelText* text, int64_t* offset);

// The last chunk when stream_options.include_usage: no choices, the usage.
nlohmann::json UsageChunkJson(const OpenAiRequest& request, const AnswerHeader& header, int64_t completion_tokens);

// The one model of /v1/models, with the limits the server enforces on a
// sequence (ServingLimitsOf): max_model_len as vLLM names it, and seam's
// max_prompt_tokens and default_max_tokens.
nlohmann::json ModelJson(const std::string& name, int64_t created, const RequestLimits& limits);

// A server-sent event carrying `data`.
std::string SseEvent(const std::string& data);

int64_t PromptTokens(const OpenAiRequest& request);  // over every choice's prompt, each counted once

}  // namespace seam::coordinator::http
