// Reading OpenAI request bodies into GenerateRequests.
#include "http/openai_request.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "http/openai_fields.h"
#include "seam/core/status.h"
#include "http/request_json.h"

namespace seam::coordinator::http {
namespace {

using Json = nlohmann::ordered_json;

absl::Status Bad(const std::string& message) { return absl::InvalidArgumentError(message); }

// The number at `key` when present and not null; false otherwise.
absl::StatusOr<bool> Number(const Json& body, const char* key, double* out) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) return false;
  if (!it->is_number()) return Bad(absl::StrCat("'", key, "' must be a number"));
  *out = it->get<double>();
  return true;
}

absl::StatusOr<bool> Integer(const Json& body, const char* key, int64_t* out) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) return false;
  if (!it->is_number_integer()) return Bad(absl::StrCat("'", key, "' must be an integer"));
  *out = it->get<int64_t>();
  return true;
}

absl::StatusOr<bool> Boolean(const Json& body, const char* key, bool fallback) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) return fallback;
  if (!it->is_boolean()) return Bad(absl::StrCat("'", key, "' must be true or false"));
  return it->get<bool>();
}

// A list of token ids, each within int32 (the vocabulary check comes later).
bool TokenList(const Json& value, std::vector<int32_t>* out) {
  if (!value.is_array() || value.empty()) return false;
  for (const Json& v : value) {
    if (!v.is_number_integer()) return false;
    const int64_t id = v.get<int64_t>();
    if (id < INT32_MIN || id > INT32_MAX) return false;
    out->push_back(static_cast<int32_t>(id));
  }
  return true;
}

// "prompt": a string, a list of strings, a list of ids, or a list of lists of ids.
absl::Status ReadPrompts(const Json& body, const ModelText* text, std::vector<std::vector<int32_t>>* prompts) {
  auto it = body.find("prompt");
  if (it == body.end() || it->is_null()) return Bad("'prompt' is required");
  const auto encode = [&](const std::string& s) -> absl::Status {
    if (text == nullptr) {
      return absl::FailedPreconditionError(
          "text prompts need the model's tokenizer.json, which this checkpoint lacks: send token ids");
    }
    prompts->push_back(text->Encode(s));
    return absl::OkStatus();
  };
  const Json& p = *it;
  if (p.is_string()) return encode(p.get<std::string>());
  if (!p.is_array() || p.empty()) {
    return Bad("'prompt' must be a string, a list of strings, a list of token ids or a list of such lists");
  }
  std::vector<int32_t> ids;
  if (TokenList(p, &ids)) {
    prompts->push_back(std::move(ids));
    return absl::OkStatus();
  }
  for (size_t i = 0; i < p.size(); ++i) {
    if (p[i].is_string()) {
      if (absl::Status s = encode(p[i].get<std::string>()); !s.ok()) return s;
      continue;
    }
    std::vector<int32_t> one;
    if (!TokenList(p[i], &one)) {
      return Bad(absl::StrCat("'prompt[", i, "]' must be a string or a non-empty list of token ids"));
    }
    prompts->push_back(std::move(one));
  }
  return absl::OkStatus();
}

// Chat messages with each content made a string (text parts joined).
absl::StatusOr<Json> ReadMessages(const Json& body) {
  auto it = body.find("messages");
  if (it == body.end() || !it->is_array() || it->empty()) return Bad("'messages' must be a non-empty list");
  Json out = Json::array();
  for (size_t i = 0; i < it->size(); ++i) {
    const Json& m = (*it)[i];
    const std::string where = absl::StrCat("'messages[", i, "]'");
    if (!m.is_object()) return Bad(absl::StrCat(where, " must be an object"));
    auto role = m.find("role");
    if (role == m.end() || !role->is_string()) return Bad(absl::StrCat(where, " needs a 'role' string"));
    Json message = m;
    auto content = m.find("content");
    if (content == m.end() || content->is_null()) {
      message["content"] = "";
    } else if (content->is_array()) {
      std::string joined;
      for (const Json& part : *content) {
        auto t = part.find("text");
        if (!part.is_object() || part.value("type", "") != "text" || t == part.end() || !t->is_string()) {
          return Bad(absl::StrCat(where, ": only text content parts are supported"));
        }
        joined += t->get<std::string>();
      }
      message["content"] = joined;
    } else if (!content->is_string()) {
      return Bad(absl::StrCat(where, ": 'content' must be a string or a list of text parts"));
    }
    out.push_back(std::move(message));
  }
  return out;
}

// "stop": a string or a list of strings.
absl::Status ReadStop(const Json& body, v1::SamplingParams* s) {
  auto it = body.find("stop");
  if (it == body.end() || it->is_null()) return absl::OkStatus();
  if (it->is_string()) {
    if (!it->get<std::string>().empty()) s->add_stop(it->get<std::string>());
    return absl::OkStatus();
  }
  if (!it->is_array()) return Bad("'stop' must be a string or a list of strings");
  for (const Json& v : *it) {
    if (!v.is_string()) return Bad("'stop' must be a string or a list of strings");
    if (!v.get<std::string>().empty()) s->add_stop(v.get<std::string>());
  }
  return absl::OkStatus();
}

// "logit_bias": {"<token id>": bias, ...}.
absl::Status ReadLogitBias(const Json& body, v1::SamplingParams* s) {
  auto it = body.find("logit_bias");
  if (it == body.end() || it->is_null()) return absl::OkStatus();
  if (!it->is_object()) return Bad("'logit_bias' must be an object of token ids to biases");
  for (const auto& [key, value] : it->items()) {
    int64_t id = 0;
    if (!absl::SimpleAtoi(key, &id) || id < INT32_MIN || id > INT32_MAX || !value.is_number()) {
      return Bad(absl::StrCat("'logit_bias' must map token ids to numbers, got \"", key, "\": ", value.dump()));
    }
    v1::LogitBias* b = s->add_logit_bias();
    b->set_token_id(static_cast<int32_t>(id));
    b->set_bias(static_cast<float>(value.get<double>()));
  }
  return absl::OkStatus();
}

// Completions: "logprobs": N (the N most likely tokens too). Chat:
// "logprobs": true, "top_logprobs": N.
absl::Status ReadLogprobs(const Json& body, bool chat, v1::SamplingParams* s) {
  int64_t top = 0;
  if (chat) {
    absl::StatusOr<bool> on = Boolean(body, "logprobs", false);
    if (!on.ok()) return on.status();
    if (auto r = Integer(body, "top_logprobs", &top); !r.ok()) return r.status();
    if (top != 0 && !*on) return Bad("'top_logprobs' needs 'logprobs': true");
    s->set_logprobs(*on);
  } else {
    auto r = Integer(body, "logprobs", &top);
    if (!r.ok()) return Bad("'logprobs' must be an integer: the number of most likely tokens to return");
    s->set_logprobs(*r);
  }
  if (top < 0 || top > UINT32_MAX) return Bad(absl::StrCat("top log-probs ", top, " must be at least 0"));
  s->set_top_logprobs(static_cast<uint32_t>(top));
  return absl::OkStatus();
}

absl::Status ReadPenalties(const Json& body, v1::SamplingParams* s) {
  double presence = 0, frequency = 0, repetition = 0;
  if (auto r = Number(body, "presence_penalty", &presence); !r.ok()) return r.status();
  if (auto r = Number(body, "frequency_penalty", &frequency); !r.ok()) return r.status();
  if (auto r = Number(body, "repetition_penalty", &repetition); !r.ok()) return r.status();
  s->set_presence_penalty(static_cast<float>(presence));
  s->set_frequency_penalty(static_cast<float>(frequency));
  s->set_repetition_penalty(static_cast<float>(repetition));
  int64_t min_tokens = 0;
  if (auto r = Integer(body, "min_tokens", &min_tokens); !r.ok()) return r.status();
  if (min_tokens < 0 || min_tokens > INT32_MAX) return Bad(absl::StrCat("'min_tokens' is ", min_tokens));
  s->set_min_tokens(static_cast<uint32_t>(min_tokens));
  return ReadLogitBias(body, s);
}

// max_tokens (chat: or max_completion_tokens); 0 when absent.
absl::StatusOr<int64_t> ReadMaxTokens(const Json& body, bool chat) {
  int64_t max_tokens = 0;
  const char* max_key = "max_tokens";
  auto r = Integer(body, max_key, &max_tokens);
  if (r.ok() && !*r && chat) r = Integer(body, max_key = "max_completion_tokens", &max_tokens);
  if (!r.ok()) return r.status();
  if (*r && (max_tokens < 1 || max_tokens > INT32_MAX)) {
    return Bad(absl::StrCat("'", max_key, "' is ", max_tokens, ", it must be at least 1"));
  }
  return max_tokens;
}

absl::Status ReadSampling(const Json& body, bool chat, const ModelText* text, v1::SamplingParams* s) {
  double temperature = 1, top_p = 1;  // OpenAI's defaults
  if (auto r = Number(body, "temperature", &temperature); !r.ok()) return r.status();
  if (auto r = Number(body, "top_p", &top_p); !r.ok()) return r.status();
  if (!std::isfinite(temperature) || temperature < 0 || temperature > 2) {
    return Bad(absl::StrCat("'temperature' is ", temperature, ", it must be within [0, 2]"));
  }
  s->set_temperature(static_cast<float>(temperature));
  s->set_top_p(static_cast<float>(top_p));  // range checked by ValidateGenerateRequest
  int64_t top_k = 0, seed = 0;
  if (auto r = Integer(body, "top_k", &top_k); !r.ok()) return r.status();
  if (top_k > 0) s->set_top_k(static_cast<uint32_t>(top_k));  // -1 / 0: off
  auto has_seed = Integer(body, "seed", &seed);
  if (!has_seed.ok()) return has_seed.status();
  if (*has_seed) s->set_seed(static_cast<uint64_t>(seed));  // absent: the driver draws one
  absl::StatusOr<int64_t> max_tokens = ReadMaxTokens(body, chat);
  if (!max_tokens.ok()) return max_tokens.status();
  s->set_max_new_tokens(static_cast<uint32_t>(*max_tokens));  // 0: the default (ParseOpenAiRequest)
  absl::StatusOr<bool> ignore_eos = Boolean(body, "ignore_eos", false);
  if (!ignore_eos.ok()) return ignore_eos.status();
  if (!*ignore_eos && text != nullptr) {
    for (int32_t id : text->EndOfTextIds()) s->add_stop_token_ids(id);
  }
  if (auto it = body.find("stop_token_ids"); it != body.end() && !it->is_null()) {
    std::vector<int32_t> ids;
    if (!TokenList(*it, &ids) && !(it->is_array() && it->empty())) {
      return Bad("'stop_token_ids' must be a list of token ids");
    }
    for (int32_t id : ids) s->add_stop_token_ids(id);
  }
  SEAM_RETURN_IF_ERROR(ReadStop(body, s));
  SEAM_RETURN_IF_ERROR(ReadLogprobs(body, chat, s));
  return ReadPenalties(body, s);
}

}  // namespace

absl::StatusOr<OpenAiRequest> ParseOpenAiRequest(const std::string& body_text, bool chat,
                                                 const std::string& request_id, const ModelText* text,
                                                 const RequestLimits& limits) {
  // Bounded: a body within the size limit cannot make its parse many times larger.
  absl::StatusOr<Json> parsed = ParseBoundedJson(body_text, RequestJsonBounds(limits));
  if (!parsed.ok()) return parsed.status();
  const Json& body = *parsed;
  if (!body.is_object()) return Bad("the request body must be a JSON object");
  OpenAiRequest request;
  request.chat = chat;
  if (auto it = body.find("model"); it != body.end() && !it->is_null()) {
    if (!it->is_string()) return Bad("'model' must be a string");
    request.model = it->get<std::string>();
  }
  if (absl::Status s = CheckOpenAiFields(body, chat); !s.ok()) return s;
  absl::StatusOr<bool> stream = Boolean(body, "stream", false);
  if (!stream.ok()) return stream.status();
  request.stream = *stream;
  if (auto it = body.find("stream_options"); it != body.end() && it->is_object()) {
    absl::StatusOr<bool> usage = Boolean(*it, "include_usage", false);
    if (!usage.ok()) return usage.status();
    request.include_usage = *usage;
  }
  int64_t n = 1;
  if (auto r = Integer(body, "n", &n); !r.ok()) return r.status();
  if (n < 1 || n > limits.max_prompts) {
    return Bad(absl::StrCat("'n' is ", n, ", it must be within [1, ", limits.max_prompts, "]"));
  }
  request.n = static_cast<int>(n);

  std::vector<std::vector<int32_t>> prompts;
  if (chat) {
    absl::StatusOr<Json> messages = ReadMessages(body);
    if (!messages.ok()) return messages.status();
    if (text == nullptr) {
      return absl::FailedPreconditionError(
          "chat needs the model's tokenizer.json and chat template, which this checkpoint lacks");
    }
    Json extra = Json::object();
    if (auto it = body.find("chat_template_kwargs"); it != body.end() && !it->is_null()) {
      if (!it->is_object()) return Bad("'chat_template_kwargs' must be an object");
      extra = *it;
    }
    absl::StatusOr<std::vector<int32_t>> ids = text->EncodeChat(*messages, extra);
    if (!ids.ok()) return ids.status();
    prompts.push_back(std::move(*ids));
  } else if (absl::Status s = ReadPrompts(body, text, &prompts); !s.ok()) {
    return s;
  }
  if (static_cast<int64_t>(prompts.size()) * n > limits.max_prompts) {
    return Bad(absl::StrCat(prompts.size(), " prompts x n ", n, " = ", prompts.size() * n,
                            " sequences, more than the ", limits.max_prompts, " one request may carry"));
  }
  request.generate.set_request_id(request_id);
  for (const auto& p : prompts) {
    request.prompt_tokens.push_back(static_cast<int>(p.size()));
    for (int j = 0; j < n; ++j) request.generate.add_prompts()->mutable_token_ids()->Add(p.begin(), p.end());
  }
  if (auto it = body.find("cache_salt"); it != body.end() && !it->is_null()) {
    if (!it->is_string()) return Bad("'cache_salt' must be a string");
    request.generate.set_cache_salt(it->get<std::string>());  // its length is checked by ValidateGenerateRequest
  }
  v1::SamplingParams* sampling = request.generate.mutable_sampling();
  if (absl::Status s = ReadSampling(body, chat, text, sampling); !s.ok()) return s;
  if (sampling->max_new_tokens() == 0 && chat) {
    // As vLLM: a chat without max_tokens may fill the rest of the context.
    const int64_t left = limits.max_positions - request.prompt_tokens.front();
    sampling->set_max_new_tokens(static_cast<uint32_t>(std::clamp<int64_t>(left, 1, INT32_MAX)));
  }
  request.logprobs = sampling->logprobs();
  request.top_logprobs = static_cast<int>(sampling->top_logprobs());
  return request;
}

}  // namespace seam::coordinator::http
