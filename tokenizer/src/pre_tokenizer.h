// The pre-tokenizer of tokenizer.json: splits normalized text into the pieces BPE sees.
// Split(Regex, Isolated) runs on PCRE2 (UTF, UCP); a ByteLevel step only maps bytes (seam's
// BPE works on raw bytes already) unless it asks for GPT-2's own regex (use_regex).
#pragma once

#include <memory>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace seam::tokenizer {

// One compiled regex split (isolated matches; the text between matches is kept as pieces).
class RegexSplit {
 public:
  // `pattern` in Oniguruma's syntax as tokenizer.json writes it; `\s` and `\S` are read as
  // Unicode White_Space (Oniguruma's meaning; PCRE2's UCP \s lacks U+0085).
  static absl::StatusOr<std::unique_ptr<RegexSplit>> Compile(std::string_view pattern);
  ~RegexSplit();
  void Split(std::string_view text, std::vector<std::string_view>* pieces) const;

 private:
  RegexSplit() = default;
  struct Code;
  std::unique_ptr<Code> code_;
};

// Rewrites `\s`/`\S` of an Oniguruma pattern for PCRE2 (exposed for tests).
absl::StatusOr<std::string> RewritePatternForPcre2(std::string_view pattern);

class PreTokenizer {
 public:
  // From tokenizer.json's "pre_tokenizer" (null: the whole text is one piece).
  static absl::StatusOr<std::unique_ptr<PreTokenizer>> FromJson(const nlohmann::json& config);
  // Appends the pieces of `text` (views into it).
  void Split(std::string_view text, std::vector<std::string_view>* pieces) const;

 private:
  std::vector<std::unique_ptr<RegexSplit>> splits_;  // applied in order
};

}  // namespace seam::tokenizer
