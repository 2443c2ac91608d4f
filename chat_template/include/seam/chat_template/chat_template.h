// A checkpoint's Jinja chat template (tokenizer_config.json "chat_template"), rendered the
// way Hugging Face transformers does (trim_blocks, lstrip_blocks, no trailing newline).
//
// Debian 12 packages no C++ Jinja engine, so this is a small one of seam's own covering
// what real chat templates use (Qwen3's, Nemotron-style ones): text, {{ }}, {# #}, whitespace
// control, if/elif/else, for (with loop.index0/index/first/last/length, unpacking, else),
// set (names and namespace attributes), namespace(), raise_exception(), range(); literals,
// lists, dicts, attribute and item access, slicing, calls of string and dict methods,
// arithmetic, comparison, `in`, `not`, `and`/`or`, `~`, conditional expressions, filters
// and `is` tests (the lists are in src/builtins.cc). A template using anything else (macro,
// call, include, extends, block, a filter or test not in the list, ...) is refused by Parse
// with INVALID_ARGUMENT naming the construct and its line.
//
// A parsed ChatTemplate is immutable and may render from many threads at once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace seam::chat_template {

struct Node;

class ChatTemplate {
 public:
  static absl::StatusOr<std::unique_ptr<ChatTemplate>> Parse(std::string_view source);
  ~ChatTemplate();

  // Renders with `variables` (an object: messages, add_generation_prompt, tools,
  // enable_thinking, bos_token, ...; key order is kept, as tojson shows it).
  // INVALID_ARGUMENT when the template calls raise_exception (the message is the
  // template's) or an operation does not apply to its values (e.g. a missing method).
  // A render is bounded, since a template comes with a checkpoint and the
  // variables with a request: INVALID_ARGUMENT past kMaxRenderSteps nodes
  // and expressions evaluated, or once the output, a string or a list value
  // passes kMaxRenderBytes bytes / kMaxRenderItems items.
  absl::StatusOr<std::string> Render(const nlohmann::ordered_json& variables) const;

  static constexpr int64_t kMaxRenderSteps = 1'000'000;
  static constexpr size_t kMaxRenderBytes = size_t{16} << 20;
  static constexpr size_t kMaxRenderItems = 1'000'000;

 private:
  ChatTemplate() = default;
  std::unique_ptr<Node> root_;
};

}  // namespace seam::chat_template
