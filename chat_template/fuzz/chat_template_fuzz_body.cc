// Properties of ChatTemplate on arbitrary sources; see the header.
#include "fuzz/chat_template_fuzz_body.h"

#include <memory>
#include <string>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "seam/chat_template/chat_template.h"

namespace seam::chat_template::fuzz {
namespace {

// A conversation touching what real templates read: roles, content, a tool
// call with arguments, a tool result, tools, the generation prompt flag.
const nlohmann::ordered_json& Conversation() {
  static const auto* variables = new nlohmann::ordered_json(nlohmann::ordered_json::parse(R"({
    "messages": [
      {"role": "system", "content": "You are terse."},
      {"role": "user", "content": "What is 2 + 2? <think>no</think>"},
      {"role": "assistant", "content": "<think>\nadd\n</think>\n\nUse the tool.",
       "tool_calls": [{"type": "function", "function": {"name": "add", "arguments": {"a": 2, "b": 2}}}]},
      {"role": "tool", "content": "4"},
      {"role": "assistant", "content": "4"},
      {"role": "user", "content": ""}
    ],
    "tools": [{"type": "function", "function": {"name": "add", "description": "a + b",
               "parameters": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}}}}],
    "add_generation_prompt": true,
    "enable_thinking": false,
    "bos_token": "<s>",
    "eos_token": "</s>"
  })"));
  return *variables;
}

absl::Status Run(absl::string_view source) {
  absl::StatusOr<std::unique_ptr<ChatTemplate>> parsed = ChatTemplate::Parse(std::string_view(source.data(), source.size()));
  if (!parsed.ok()) return parsed.status();
  return (*parsed)->Render(Conversation()).status();
}

}  // namespace

absl::StatusCode RenderCode(absl::string_view source) { return Run(source).code(); }

absl::Status CheckTemplateProperties(absl::string_view source) {
  const absl::Status status = Run(source);
  if (status.ok() || status.code() == absl::StatusCode::kInvalidArgument) return absl::OkStatus();
  return absl::InternalError(absl::StrCat("undocumented refusal ", status.ToString()));
}

}  // namespace seam::chat_template::fuzz
