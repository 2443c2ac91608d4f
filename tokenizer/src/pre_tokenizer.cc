#define PCRE2_CODE_UNIT_WIDTH 8
#include "pre_tokenizer.h"

#include <pcre2.h>

#include "absl/strings/str_cat.h"

namespace seam::tokenizer {
namespace {

// Unicode White_Space, the set Oniguruma's \s matches.
constexpr char kWhiteSpace[] =
    "\\t\\n\\x{0B}\\f\\r\\x{20}\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}";

// GPT-2's pattern, used by ByteLevel pre-tokenizers with use_regex.
constexpr char kGpt2Pattern[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

absl::Status Unsupported(const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat("tokenizer.json: pre-tokenizer ", what, " is not supported"));
}

}  // namespace

struct RegexSplit::Code {
  pcre2_code* code = nullptr;
  bool jit = false;
  ~Code() { pcre2_code_free(code); }
};

absl::StatusOr<std::string> RewritePatternForPcre2(std::string_view pattern) {
  std::string out;
  bool in_class = false;
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      const char e = pattern[++i];
      if (e == 's') {
        absl::StrAppend(&out, in_class ? "" : "[", kWhiteSpace, in_class ? "" : "]");
      } else if (e == 'S') {
        if (in_class) return absl::InvalidArgumentError("tokenizer.json: regex uses \\S inside a character class");
        absl::StrAppend(&out, "[^", kWhiteSpace, "]");
      } else {
        out.push_back(c);
        out.push_back(e);
      }
      continue;
    }
    if (c == '[' && !in_class) {
      in_class = true;
      out.push_back(c);
      if (i + 1 < pattern.size() && pattern[i + 1] == '^') out.push_back(pattern[++i]);
      if (i + 1 < pattern.size() && pattern[i + 1] == ']') out.push_back(pattern[++i]);  // literal ]
      continue;
    }
    if (c == ']' && in_class) in_class = false;
    out.push_back(c);
  }
  return out;
}

absl::StatusOr<std::unique_ptr<RegexSplit>> RegexSplit::Compile(std::string_view pattern) {
  auto rewritten = RewritePatternForPcre2(pattern);
  if (!rewritten.ok()) return rewritten.status();
  int error = 0;
  PCRE2_SIZE offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(rewritten->data()), rewritten->size(),
                                   PCRE2_UTF | PCRE2_UCP, &error, &offset, nullptr);
  if (code == nullptr) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error, message, sizeof(message));
    return absl::InvalidArgumentError(absl::StrCat("tokenizer.json: pre-tokenizer regex does not compile at offset ",
                                                   offset, ": ", reinterpret_cast<const char*>(message)));
  }
  auto split = std::unique_ptr<RegexSplit>(new RegexSplit());
  split->code_ = std::make_unique<Code>();
  split->code_->code = code;
  split->code_->jit = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
  return split;
}

RegexSplit::~RegexSplit() = default;

void RegexSplit::Split(std::string_view text, std::vector<std::string_view>* pieces) const {
  pcre2_match_data* match = pcre2_match_data_create_from_pattern(code_->code, nullptr);
  pcre2_match_context* context = pcre2_match_context_create(nullptr);
  pcre2_jit_stack* stack = code_->jit ? pcre2_jit_stack_create(32 * 1024, 8 * 1024 * 1024, nullptr) : nullptr;
  if (stack != nullptr) pcre2_jit_stack_assign(context, nullptr, stack);
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t at = 0, kept = 0;
  while (at <= text.size()) {
    int rc = pcre2_match(code_->code, subject, text.size(), at, PCRE2_NO_UTF_CHECK, match, context);
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT) {
      rc = pcre2_match(code_->code, subject, text.size(), at, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, match, context);
    }
    if (rc < 0) break;  // no further match (the text was checked as UTF-8 before)
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(match);
    const size_t begin = ov[0], end = ov[1];
    if (end == begin) {  // empty match: step one character
      at = begin + 1;
      while (at < text.size() && (static_cast<unsigned char>(text[at]) & 0xC0) == 0x80) ++at;
      continue;
    }
    if (begin > kept) pieces->push_back(text.substr(kept, begin - kept));
    pieces->push_back(text.substr(begin, end - begin));
    kept = at = end;
  }
  if (kept < text.size()) pieces->push_back(text.substr(kept));
  if (stack != nullptr) pcre2_jit_stack_free(stack);
  pcre2_match_context_free(context);
  pcre2_match_data_free(match);
}

absl::StatusOr<std::unique_ptr<PreTokenizer>> PreTokenizer::FromJson(const nlohmann::json& config) {
  auto pre = std::make_unique<PreTokenizer>();
  if (config.is_null()) return pre;
  std::vector<const nlohmann::json*> steps;
  const std::string type = config.value("type", std::string());
  const nlohmann::json& sequence = type == "Sequence" ? config.at("pretokenizers") : config;
  if (type == "Sequence" && sequence.is_array()) {
    for (const auto& step : sequence) steps.push_back(&step);
  } else {
    steps.push_back(&config);
  }
  for (const nlohmann::json* step : steps) {
    const std::string kind = step->value("type", std::string());
    if (kind == "Split") {
      const auto& pattern = step->value("pattern", nlohmann::json::object());
      if (!pattern.contains("Regex") || !pattern["Regex"].is_string()) return Unsupported("Split without a Regex pattern");
      if (step->value("behavior", std::string()) != "Isolated") {
        return Unsupported(absl::StrCat("Split with behavior '", step->value("behavior", std::string()), "'"));
      }
      if (step->value("invert", false)) return Unsupported("Split with invert");
      auto split = RegexSplit::Compile(pattern["Regex"].get<std::string>());
      if (!split.ok()) return split.status();
      pre->splits_.push_back(std::move(*split));
    } else if (kind == "ByteLevel") {
      if (step->value("add_prefix_space", false)) return Unsupported("ByteLevel with add_prefix_space");
      if (step->value("use_regex", true)) {
        auto split = RegexSplit::Compile(kGpt2Pattern);
        if (!split.ok()) return split.status();
        pre->splits_.push_back(std::move(*split));
      }
    } else {
      return Unsupported(absl::StrCat("'", kind, "'"));
    }
  }
  return pre;
}

void PreTokenizer::Split(std::string_view text, std::vector<std::string_view>* pieces) const {
  std::vector<std::string_view> current{text}, next;
  for (const auto& split : splits_) {
    next.clear();
    for (std::string_view piece : current) split->Split(piece, &next);
    current.swap(next);
  }
  for (std::string_view piece : current) {
    if (!piece.empty()) pieces->push_back(piece);
  }
}

}  // namespace seam::tokenizer
