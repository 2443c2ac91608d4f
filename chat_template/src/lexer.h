// Splits template source into text and tags, applying whitespace control (`{%-`, `-%}`)
// and transformers' settings (trim_blocks, lstrip_blocks, no trailing newline), and
// tokenizes the expressions inside tags.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace seam::chat_template {

struct Token {
  enum class Kind { kName, kString, kInt, kFloat, kOp, kEnd };
  Kind kind = Kind::kEnd;
  std::string text;  // names, operators; the unescaped value of strings; numbers as written
  int line = 0;
};

struct Chunk {
  enum class Kind { kText, kOutput, kStatement };
  Kind kind = Kind::kText;
  std::string text;           // kText
  std::vector<Token> tokens;  // kOutput, kStatement (ending with a kEnd token)
  int line = 0;
};

absl::StatusOr<std::vector<Chunk>> Lex(std::string_view source);

}  // namespace seam::chat_template
