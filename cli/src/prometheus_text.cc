// prometheus_text.h: a hand-written reader of sample lines.
#include "prometheus_text.h"

#include <cctype>
#include <cmath>
#include <limits>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace seam::cli {
namespace {

bool NameStart(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_' || c == ':'; }
bool NameChar(char c) { return NameStart(c) || std::isdigit(static_cast<unsigned char>(c)); }

// Reads a sample line from the front of `rest`; "" on success, else why not.
class LineReader {
 public:
  explicit LineReader(absl::string_view line) : rest_(line) {}

  std::string Read(PrometheusSample* s) {
    if (std::string bad = Name(&s->name); !bad.empty()) return bad;
    if (!rest_.empty() && rest_.front() == '{') {
      rest_.remove_prefix(1);
      if (std::string bad = Labels(&s->labels); !bad.empty()) return bad;
    }
    if (rest_.empty() || (rest_.front() != ' ' && rest_.front() != '\t')) return "expected a space before the value";
    SkipSpaces();
    const size_t end = rest_.find_first_of(" \t");
    const absl::string_view value = rest_.substr(0, end);
    if (!Number(value, &s->value)) return absl::StrCat("'", value, "' is not a number");
    rest_ = end == absl::string_view::npos ? absl::string_view() : rest_.substr(end);
    SkipSpaces();
    if (!rest_.empty()) {  // a timestamp (milliseconds, an integer) may follow
      int64_t ms = 0;
      if (!absl::SimpleAtoi(rest_, &ms)) return absl::StrCat("'", rest_, "' after the value is not a timestamp");
    }
    return "";
  }

 private:
  std::string Name(std::string* out) {
    size_t n = 0;
    while (n < rest_.size() && (n == 0 ? NameStart(rest_[n]) : NameChar(rest_[n]))) ++n;
    if (n == 0) return "expected a metric name";
    *out = std::string(rest_.substr(0, n));
    rest_.remove_prefix(n);
    return "";
  }

  std::string Labels(std::vector<std::pair<std::string, std::string>>* labels) {
    while (true) {
      SkipSpaces();
      if (!rest_.empty() && rest_.front() == '}') {
        rest_.remove_prefix(1);
        return "";
      }
      std::string key, value;
      if (std::string bad = Name(&key); !bad.empty()) return "expected a label name or '}'";
      if (rest_.size() < 2 || rest_[0] != '=' || rest_[1] != '"') return absl::StrCat("label ", key, ": expected =\"");
      rest_.remove_prefix(2);
      if (std::string bad = QuotedValue(&value); !bad.empty()) return absl::StrCat("label ", key, ": ", bad);
      labels->emplace_back(std::move(key), std::move(value));
      SkipSpaces();
      if (!rest_.empty() && rest_.front() == ',') rest_.remove_prefix(1);
      else if (rest_.empty() || rest_.front() != '}') return "expected ',' or '}' after a label";
    }
  }

  // After the opening quote: up to the closing one, with \\, \" and \n unescaped.
  std::string QuotedValue(std::string* out) {
    for (size_t i = 0; i < rest_.size(); ++i) {
      const char c = rest_[i];
      if (c == '"') {
        rest_.remove_prefix(i + 1);
        return "";
      }
      if (c != '\\') {
        out->push_back(c);
        continue;
      }
      if (++i == rest_.size()) break;
      const char e = rest_[i];
      if (e == 'n') out->push_back('\n');
      else if (e == '\\' || e == '"') out->push_back(e);
      else return absl::StrCat("unknown escape \\", std::string(1, e));
    }
    return "unterminated value";
  }

  static bool Number(absl::string_view text, double* out) {
    if (text == "+Inf" || text == "Inf") *out = std::numeric_limits<double>::infinity();
    else if (text == "-Inf") *out = -std::numeric_limits<double>::infinity();
    else if (text == "NaN") *out = std::numeric_limits<double>::quiet_NaN();
    else return !text.empty() && absl::SimpleAtod(text, out) && std::isfinite(*out);
    return true;
  }

  void SkipSpaces() {
    while (!rest_.empty() && (rest_.front() == ' ' || rest_.front() == '\t')) rest_.remove_prefix(1);
  }

  absl::string_view rest_;
};

}  // namespace

std::string PrometheusSample::Label(absl::string_view key) const {
  for (const auto& [k, v] : labels) {
    if (k == key) return v;
  }
  return "";
}

absl::StatusOr<std::vector<PrometheusSample>> ParsePrometheusText(absl::string_view text) {
  std::vector<PrometheusSample> samples;
  int number = 0;
  while (!text.empty()) {
    const size_t end = text.find('\n');
    absl::string_view line = text.substr(0, end);
    text = end == absl::string_view::npos ? absl::string_view() : text.substr(end + 1);
    ++number;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    while (!line.empty() && (line.front() == ' ' || line.front() == '\t')) line.remove_prefix(1);
    if (line.empty() || line.front() == '#') continue;
    PrometheusSample s;
    if (std::string bad = LineReader(line).Read(&s); !bad.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("line ", number, ": ", bad, ": ", line.substr(0, 200)));
    }
    samples.push_back(std::move(s));
  }
  return samples;
}

}  // namespace seam::cli
