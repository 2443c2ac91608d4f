#include "lexer.h"

#include <cctype>

#include "absl/strings/str_cat.h"
#include "value.h"

namespace seam::chat_template {
namespace {

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

absl::Status Error(int line, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat("chat template line ", line, ": ", what));
}

int CountLines(std::string_view s) {
  int n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

// Reads a quoted string starting at s[i] (the quote); returns the index after it.
absl::StatusOr<size_t> ReadString(std::string_view s, size_t i, int line, std::string* value) {
  const char quote = s[i++];
  while (i < s.size() && s[i] != quote) {
    char c = s[i++];
    if (c != '\\' || i >= s.size()) {
      value->push_back(c);
      continue;
    }
    c = s[i++];
    switch (c) {
      case 'n': value->push_back('\n'); break;
      case 't': value->push_back('\t'); break;
      case 'r': value->push_back('\r'); break;
      case 'b': value->push_back('\b'); break;
      case 'f': value->push_back('\f'); break;
      case '0': value->push_back('\0'); break;
      case '\\': case '\'': case '"': value->push_back(c); break;
      case 'u': case 'x': {
        const size_t n = c == 'u' ? 4 : 2;
        // Exactly n hex digits (Python's rule); std::stoul would throw on none.
        if (i + n > s.size()) return Error(line, "bad escape in a string");
        uint32_t code = 0;
        for (size_t k = i; k < i + n; ++k) {
          if (!std::isxdigit(static_cast<unsigned char>(s[k]))) return Error(line, "bad escape in a string");
          code = code * 16 + static_cast<uint32_t>(std::isdigit(static_cast<unsigned char>(s[k]))
                                                       ? s[k] - '0'
                                                       : std::tolower(static_cast<unsigned char>(s[k])) - 'a' + 10);
        }
        AppendUtf8(code, value);
        i += n;
        break;
      }
      default: value->push_back('\\'); value->push_back(c);  // Python keeps unknown escapes
    }
  }
  if (i >= s.size()) return Error(line, "unterminated string");
  return i + 1;
}

absl::StatusOr<std::vector<Token>> Tokenize(std::string_view s, int line) {
  static const char* kOps[] = {"**", "//", "==", "!=", "<=", ">=", "(", ")", "[", "]", "{", "}", ".", ",", ":",
                               "|", "~", "+", "-", "*", "/", "%", "<", ">", "="};
  std::vector<Token> tokens;
  for (size_t i = 0; i < s.size();) {
    const char c = s[i];
    if (IsSpace(c)) {
      line += c == '\n';
      ++i;
    } else if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t j = i;
      while (j < s.size() && (std::isalnum(static_cast<unsigned char>(s[j])) || s[j] == '_')) ++j;
      tokens.push_back({Token::Kind::kName, std::string(s.substr(i, j - i)), line});
      i = j;
    } else if (std::isdigit(static_cast<unsigned char>(c))) {
      size_t j = i;
      while (j < s.size() && (std::isdigit(static_cast<unsigned char>(s[j])) || s[j] == '_')) ++j;
      bool is_float = false;
      if (j + 1 < s.size() && s[j] == '.' && std::isdigit(static_cast<unsigned char>(s[j + 1]))) {
        is_float = true;
        for (++j; j < s.size() && std::isdigit(static_cast<unsigned char>(s[j])); ++j) {}
      }
      tokens.push_back({is_float ? Token::Kind::kFloat : Token::Kind::kInt, std::string(s.substr(i, j - i)), line});
      i = j;
    } else if (c == '\'' || c == '"') {
      Token t{Token::Kind::kString, "", line};
      auto end = ReadString(s, i, line, &t.text);
      if (!end.ok()) return end.status();
      tokens.push_back(std::move(t));
      i = *end;
    } else {
      bool found = false;
      for (const char* op : kOps) {
        const std::string_view o(op);
        if (s.substr(i, o.size()) == o) {
          tokens.push_back({Token::Kind::kOp, std::string(o), line});
          i += o.size();
          found = true;
          break;
        }
      }
      if (!found) return Error(line, absl::StrCat("unexpected character '", std::string(1, c), "'"));
    }
  }
  tokens.push_back({Token::Kind::kEnd, "", line});
  return tokens;
}

// Index of the closing delimiter of a tag whose body starts at `i` (strings skipped).
size_t FindClose(std::string_view s, size_t i, std::string_view close) {
  while (i < s.size()) {
    if (s[i] == '\'' || s[i] == '"') {
      const char quote = s[i++];
      while (i < s.size() && s[i] != quote) i += s[i] == '\\' ? 2 : 1;
      ++i;
      continue;
    }
    if (s.substr(i, close.size()) == close) return i;
    ++i;
  }
  return std::string_view::npos;
}

}  // namespace

absl::StatusOr<std::vector<Chunk>> Lex(std::string_view source) {
  if (!source.empty() && source.back() == '\n') source.remove_suffix(1);  // keep_trailing_newline=False
  std::vector<Chunk> chunks;
  bool strip_next = false;  // the previous tag ended with `-`
  size_t pos = 0;
  int line = 1;
  while (pos <= source.size()) {
    size_t tag = source.find('{', pos);
    while (tag != std::string_view::npos && tag + 1 < source.size() && source[tag + 1] != '{' &&
           source[tag + 1] != '%' && source[tag + 1] != '#') {
      tag = source.find('{', tag + 1);
    }
    if (tag + 1 >= source.size()) tag = std::string_view::npos;
    std::string text(source.substr(pos, tag == std::string_view::npos ? std::string_view::npos : tag - pos));
    const int text_line = line;
    line += CountLines(text);
    if (strip_next) {
      size_t k = 0;
      while (k < text.size() && IsSpace(text[k])) ++k;
      text.erase(0, k);
    }
    if (tag == std::string_view::npos) {
      if (!text.empty()) chunks.push_back({Chunk::Kind::kText, text, {}, text_line});
      break;
    }
    const char type = source[tag + 1];
    const char modifier = tag + 2 < source.size() ? source[tag + 2] : '\0';
    if (modifier == '-') {
      while (!text.empty() && IsSpace(text.back())) text.pop_back();
    } else if (type != '{' && modifier != '+') {  // lstrip_blocks: blanks from the line start to the tag
      const size_t nl = text.find_last_of('\n');
      const bool line_start = nl != std::string::npos || pos == 0 || source[pos - 1] == '\n';
      const size_t from = nl == std::string::npos ? 0 : nl + 1;
      if (line_start && text.find_first_not_of(" \t", from) == std::string::npos) text.erase(from);
    }
    if (!text.empty()) chunks.push_back({Chunk::Kind::kText, text, {}, text_line});
    const std::string_view close = type == '{' ? "}}" : type == '%' ? "%}" : "#}";
    const size_t body = tag + 2 + (modifier == '-' || modifier == '+' ? 1 : 0);
    const size_t end = type == '#' ? source.find(close, body) : FindClose(source, body, close);
    if (end == std::string_view::npos) return Error(line, absl::StrCat("unclosed tag '", std::string(source.substr(tag, 2)), "'"));
    std::string_view inner = source.substr(body, end - body);
    strip_next = !inner.empty() && inner.back() == '-';
    if (strip_next) inner.remove_suffix(1);
    if (type != '#') {
      auto tokens = Tokenize(inner, line);
      if (!tokens.ok()) return tokens.status();
      chunks.push_back({type == '{' ? Chunk::Kind::kOutput : Chunk::Kind::kStatement, "", std::move(*tokens), line});
    }
    line += CountLines(source.substr(tag, end + 2 - tag));
    pos = end + 2;
    if (!strip_next && type != '{' && pos < source.size() && source[pos] == '\n') {  // trim_blocks
      ++pos;
      ++line;
    }
    if (pos >= source.size()) break;
  }
  return chunks;
}

}  // namespace seam::chat_template
