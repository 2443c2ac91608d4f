// OpenAI answer bodies.
#include "http/openai_response.h"

#include "seam/tokenizer/utf8.h"

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
  return *reason == FinishReason::kStopToken || *reason == FinishReason::kStopString ? "stop" : "length";
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

Json LogprobsJson(const OpenAiRequest& request, const ModelText* text,
                  const std::vector<v1::ChosenTokenLogprobs>& logprobs, int64_t* offset) {
  if (!request.logprobs) return nullptr;
  const auto token_bytes = [text](int32_t id) { return text == nullptr ? std::string() : text->DecodeBytes({id}); };
  const auto token_text = [&](int32_t id) { return tokenizer::ReplaceInvalidUtf8(token_bytes(id)); };
  if (request.chat) {
    const auto entry = [&](int32_t id, float logprob) {
      const std::string bytes = token_bytes(id);
      std::vector<int> values;
      for (unsigned char c : bytes) values.push_back(c);
      return Json{{"token", tokenizer::ReplaceInvalidUtf8(bytes)}, {"logprob", logprob}, {"bytes", values}};
    };
    Json content = Json::array();
    for (const v1::ChosenTokenLogprobs& lp : logprobs) {
      Json e = entry(lp.token_id(), lp.logprob());
      Json top = Json::array();
      for (const v1::TokenLogprob& t : lp.top()) top.push_back(entry(t.token_id(), t.logprob()));
      e["top_logprobs"] = std::move(top);
      content.push_back(std::move(e));
    }
    return Json{{"content", std::move(content)}, {"refusal", nullptr}};
  }
  Json tokens = Json::array(), token_logprobs = Json::array(), top_logprobs = Json::array(), offsets = Json::array();
  for (const v1::ChosenTokenLogprobs& lp : logprobs) {
    const std::string t = token_text(lp.token_id());
    tokens.push_back(t);
    token_logprobs.push_back(lp.logprob());
    Json top = Json::object();
    for (const v1::TokenLogprob& e : lp.top()) top[token_text(e.token_id())] = e.logprob();
    top_logprobs.push_back(std::move(top));
    offsets.push_back(*offset);
    for (unsigned char c : t) *offset += (c & 0xC0) != 0x80;  // characters, not bytes
  }
  return Json{{"tokens", std::move(tokens)},
              {"token_logprobs", std::move(token_logprobs)},
              {"top_logprobs", std::move(top_logprobs)},
              {"text_offset", std::move(offsets)}};
}

Json CompletionJson(const OpenAiRequest& request, const AnswerHeader& header, const std::vector<ChoiceOutput>& choices,
                    int64_t completion_tokens, const ModelText* text) {
  Json answer = Header(request, header, false);
  Json out = Json::array();
  for (size_t i = 0; i < choices.size(); ++i) {
    Json choice = {{"index", i}};
    if (request.chat) {
      choice["message"] = Json{{"role", "assistant"}, {"content", choices[i].text}};
    } else {
      choice["text"] = choices[i].text;
    }
    int64_t offset = 0;
    choice["logprobs"] = LogprobsJson(request, text, choices[i].logprobs, &offset);
    choice["finish_reason"] = FinishReasonJson(choices[i].finish);
    out.push_back(std::move(choice));
  }
  answer["choices"] = std::move(out);
  answer["usage"] = UsageJson(PromptTokens(request), completion_tokens);
  return answer;
}

Json ChunkJson(const OpenAiRequest& request, const AnswerHeader& header, int index, const ChoiceOutput& part,
               bool role, const ModelText* text, int64_t* offset) {
  Json chunk = Header(request, header, true);
  Json choice = {{"index", index}};
  if (request.chat) {
    Json delta = Json::object();
    if (role) delta["role"] = "assistant";
    if (!part.text.empty() || role) delta["content"] = part.text;
    choice["delta"] = std::move(delta);
  } else {
    choice["text"] = part.text;
  }
  choice["logprobs"] = part.logprobs.empty() ? Json(nullptr) : LogprobsJson(request, text, part.logprobs, offset);
  choice["finish_reason"] = FinishReasonJson(part.finish);
  chunk["choices"] = Json::array({std::move(choice)});
  return chunk;
}

Json UsageChunkJson(const OpenAiRequest& request, const AnswerHeader& header, int64_t completion_tokens) {
  Json chunk = Header(request, header, true);
  chunk["choices"] = Json::array();
  chunk["usage"] = UsageJson(PromptTokens(request), completion_tokens);
  return chunk;
}

Json ModelJson(const std::string& name, int64_t created, const RequestLimits& limits) {
  const ServingLimits l = ServingLimitsOf(limits);
  return Json{{"id", name},
              {"object", "model"},
              {"created", created},
              {"owned_by", "seam"},
              {"max_model_len", l.max_model_len},
              {"max_prompt_tokens", l.max_prompt_tokens},
              {"default_max_tokens", l.default_max_tokens}};
}

std::string SseEvent(const std::string& data) { return "data: " + data + "\n\n"; }

}  // namespace seam::coordinator::http
