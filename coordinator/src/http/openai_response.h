// The JSON of OpenAI's answers: a whole completion or chat completion, and
// the chunks of a streamed one (each sent as a server-sent event "data: ...").
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "http/openai_request.h"
#include "seam/coordinator/scheduler_types.h"

namespace seam::coordinator::http {

// Names the answer: its id, when it was made, the served model.
struct AnswerHeader {
  std::string id;
  int64_t created = 0;  // Unix seconds
  std::string model;
};

// "stop" (a stop token), "length" (max_tokens) or null (not finished).
nlohmann::json FinishReasonJson(std::optional<FinishReason> reason);

nlohmann::json UsageJson(int64_t prompt_tokens, int64_t completion_tokens);

// The non-streamed answer: one choice per sequence of `request`.
nlohmann::json CompletionJson(const OpenAiRequest& request, const AnswerHeader& header,
                              const std::vector<std::string>& texts,
                              const std::vector<std::optional<FinishReason>>& finish, int64_t completion_tokens);

// One streamed chunk of choice `index`: `text` new text (for a chat, the
// delta's content; `role` adds the delta's role), `finish` once it ended.
nlohmann::json ChunkJson(const OpenAiRequest& request, const AnswerHeader& header, int index,
                         const std::string& text, bool role, std::optional<FinishReason> finish);

// The last chunk when stream_options.include_usage: no choices, the usage.
nlohmann::json UsageChunkJson(const OpenAiRequest& request, const AnswerHeader& header, int64_t completion_tokens);

// A server-sent event carrying `data`.
std::string SseEvent(const std::string& data);

int64_t PromptTokens(const OpenAiRequest& request);  // over every choice's prompt, each counted once

}  // namespace seam::coordinator::http
