// Which OpenAI request fields seam implements (see openai_fields.h).
#include "http/openai_fields.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace seam::coordinator::http {
namespace {

using Json = nlohmann::ordered_json;

enum class Where { kBoth, kCompletions, kChat };

// What seam does with a field: reads it, or takes only its default (the
// predicate says whether a value is one), or it changes nothing in the
// answer (no predicate, not read).
struct Field {
  const char* name;
  Where where;
  bool read;
  bool (*is_default)(const Json& value);  // null: any value (read, or without effect)
  const char* why;                        // the refusal's reason
};

bool Null(const Json& v) { return v.is_null(); }
bool NullOrFalse(const Json& v) { return v.is_null() || (v.is_boolean() && !v.get<bool>()); }
bool NullOrEmpty(const Json& v) {
  return v.is_null() || (v.is_array() && v.empty()) || (v.is_string() && v.get<std::string>().empty()) ||
         (v.is_object() && v.empty());
}
bool NullOrOne(const Json& v) { return v.is_null() || (v.is_number_integer() && v.get<int64_t>() == 1); }
bool NullOrNone(const Json& v) { return v.is_null() || v == "none"; }
bool TextFormat(const Json& v) { return v.is_null() || (v.is_object() && v.size() == 1 && v.value("type", "") == "text"); }
bool TextOnly(const Json& v) { return v.is_null() || v == Json::array({"text"}); }
bool AnyTier(const Json& v) { return v.is_null() || v == "auto" || v == "default"; }
bool TrueOrNull(const Json& v) { return v.is_null() || (v.is_boolean() && v.get<bool>()); }

constexpr Field kFields[] = {
    {"model", Where::kBoth, true, nullptr, ""},
    {"prompt", Where::kCompletions, true, nullptr, ""},
    {"messages", Where::kChat, true, nullptr, ""},
    {"max_tokens", Where::kBoth, true, nullptr, ""},
    {"max_completion_tokens", Where::kChat, true, nullptr, ""},
    {"n", Where::kBoth, true, nullptr, ""},
    {"temperature", Where::kBoth, true, nullptr, ""},
    {"top_p", Where::kBoth, true, nullptr, ""},
    {"seed", Where::kBoth, true, nullptr, ""},
    {"stop", Where::kBoth, true, nullptr, ""},
    {"stream", Where::kBoth, true, nullptr, ""},
    {"stream_options", Where::kBoth, true, nullptr, ""},
    {"presence_penalty", Where::kBoth, true, nullptr, ""},
    {"frequency_penalty", Where::kBoth, true, nullptr, ""},
    {"logit_bias", Where::kBoth, true, nullptr, ""},
    {"logprobs", Where::kBoth, true, nullptr, ""},
    {"top_logprobs", Where::kChat, true, nullptr, ""},
    // vLLM's extras seam reads.
    {"top_k", Where::kBoth, true, nullptr, ""},
    {"min_tokens", Where::kBoth, true, nullptr, ""},
    {"repetition_penalty", Where::kBoth, true, nullptr, ""},
    {"stop_token_ids", Where::kBoth, true, nullptr, ""},
    {"ignore_eos", Where::kBoth, true, nullptr, ""},
    {"chat_template_kwargs", Where::kChat, true, nullptr, ""},
    {"cache_salt", Where::kBoth, true, nullptr, ""},  // prefix caching: shared only under equal salts
    // Without effect on the answer: who asks, what a stored completion would carry, cache hints.
    {"user", Where::kBoth, false, nullptr, ""},
    {"safety_identifier", Where::kBoth, false, nullptr, ""},
    {"prompt_cache_key", Where::kBoth, false, nullptr, ""},
    {"metadata", Where::kChat, false, nullptr, ""},
    {"parallel_tool_calls", Where::kChat, false, nullptr, ""},  // only with tools, which are refused
    // Taken at their default only.
    {"echo", Where::kCompletions, false, NullOrFalse, "is not supported (the answer never repeats the prompt)"},
    {"suffix", Where::kCompletions, false, NullOrEmpty, "is not supported (no insertion)"},
    {"best_of", Where::kCompletions, false, NullOrOne, "is not supported (one sequence per choice)"},
    {"tools", Where::kChat, false, NullOrEmpty, "are not supported (no tool calls)"},
    {"tool_choice", Where::kChat, false, NullOrNone, "is not supported (no tool calls)"},
    {"functions", Where::kChat, false, NullOrEmpty, "are not supported (no function calls)"},
    {"function_call", Where::kChat, false, NullOrNone, "is not supported (no function calls)"},
    {"response_format", Where::kChat, false, TextFormat, "is not supported: only {\"type\": \"text\"}"},
    {"audio", Where::kChat, false, Null, "is not supported (text only)"},
    {"modalities", Where::kChat, false, TextOnly, "is not supported: only [\"text\"]"},
    {"prediction", Where::kChat, false, Null, "is not supported (no predicted outputs)"},
    {"reasoning_effort", Where::kChat, false, Null, "is not supported"},
    {"verbosity", Where::kChat, false, Null, "is not supported"},
    {"web_search_options", Where::kChat, false, Null, "is not supported (no web search)"},
    {"service_tier", Where::kBoth, false, AnyTier, "is not supported: only \"auto\" or \"default\""},
    {"store", Where::kChat, false, NullOrFalse, "is not supported (completions are not stored)"},
    {"skip_special_tokens", Where::kBoth, false, TrueOrNull, "is not supported: special tokens are always left out"},
    {"include_stop_str_in_output", Where::kBoth, false, NullOrFalse,
     "is not supported: a stop string is always left out"},
};

bool Applies(Where where, bool chat) {
  return where == Where::kBoth || (chat ? where == Where::kChat : where == Where::kCompletions);
}

absl::Status CheckStreamOptions(const Json& options) {
  if (options.is_null()) return absl::OkStatus();
  if (!options.is_object()) return absl::InvalidArgumentError("'stream_options' must be an object");
  for (const auto& [key, value] : options.items()) {
    if (key == "include_usage") continue;
    if (key == "include_obfuscation" && NullOrFalse(value)) continue;
    return absl::InvalidArgumentError(absl::StrCat("'stream_options.", key, "' is not supported"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckOpenAiFields(const Json& body, bool chat) {
  const char* path = chat ? "/v1/chat/completions" : "/v1/completions";
  for (const auto& [key, value] : body.items()) {
    const Field* field = nullptr;
    for (const Field& f : kFields) {
      if (key == f.name && Applies(f.where, chat)) field = &f;
    }
    if (field == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("'", key, "' is not a parameter ", path, " takes"));
    }
    if (field->is_default != nullptr && !field->is_default(value)) {
      return absl::InvalidArgumentError(absl::StrCat("'", key, "' ", field->why));
    }
  }
  if (auto it = body.find("stream_options"); it != body.end()) return CheckStreamOptions(*it);
  return absl::OkStatus();
}

}  // namespace seam::coordinator::http
