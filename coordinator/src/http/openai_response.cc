// OpenAI answer bodies.
#include "http/openai_response.h"

namespace seam::coordinator::http {
namespace {

using Json = nlohmann::json;

Json Header(const OpenAiRequest& request, const AnswerHeader& header, bool chunk) {
  const char* object = request.chat ? (chunk ? "chat.completion.chunk" : "chat.completion") : "text_completion";
  return Json{{"id", header.id}, {"object", object}, {"created", header.created}, {"model", header.model}};
}

}  // namespace

Json FinishReasonJson(std::optional<FinishReason> reason) {
  if (!reason) return nullptr;
  return *reason == FinishReason::kStopToken ? "stop" : "length";
}

Json UsageJson(int64_t prompt_tokens, int64_t completion_tokens) {
  return Json{{"prompt_tokens", prompt_tokens},
              {"completion_tokens", completion_tokens},
              {"total_tokens", prompt_tokens + completion_tokens}};
}

int64_t PromptTokens(const OpenAiRequest& request) {
  int64_t total = 0;
  for (int n : request.prompt_tokens) total += n;
  return total;
}

Json CompletionJson(const OpenAiRequest& request, const AnswerHeader& header, const std::vector<std::string>& texts,
                    const std::vector<std::optional<FinishReason>>& finish, int64_t completion_tokens) {
  Json answer = Header(request, header, false);
  Json choices = Json::array();
  for (size_t i = 0; i < texts.size(); ++i) {
    Json choice = {{"index", i}};
    if (request.chat) {
      choice["message"] = Json{{"role", "assistant"}, {"content", texts[i]}};
    } else {
      choice["text"] = texts[i];
    }
    choice["logprobs"] = nullptr;
    choice["finish_reason"] = FinishReasonJson(finish[i]);
    choices.push_back(std::move(choice));
  }
  answer["choices"] = std::move(choices);
  answer["usage"] = UsageJson(PromptTokens(request), completion_tokens);
  return answer;
}

Json ChunkJson(const OpenAiRequest& request, const AnswerHeader& header, int index, const std::string& text,
               bool role, std::optional<FinishReason> finish) {
  Json chunk = Header(request, header, true);
  Json choice = {{"index", index}};
  if (request.chat) {
    Json delta = Json::object();
    if (role) delta["role"] = "assistant";
    if (!text.empty() || role) delta["content"] = text;
    choice["delta"] = std::move(delta);
  } else {
    choice["text"] = text;
  }
  choice["logprobs"] = nullptr;
  choice["finish_reason"] = FinishReasonJson(finish);
  chunk["choices"] = Json::array({std::move(choice)});
  return chunk;
}

Json UsageChunkJson(const OpenAiRequest& request, const AnswerHeader& header, int64_t completion_tokens) {
  Json chunk = Header(request, header, true);
  chunk["choices"] = Json::array();
  chunk["usage"] = UsageJson(PromptTokens(request), completion_tokens);
  return chunk;
}

std::string SseEvent(const std::string& data) { return "data: " + data + "\n\n"; }

}  // namespace seam::coordinator::http
