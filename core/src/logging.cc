// Process-wide logging: spdlog's default logger with one formatter of our own,
// so that text and JSON lines carry the thread's scoped fields alike.
#include "seam/core/logging.h"

#include <chrono>
#include <cstdlib>
#include <ctime>
#include <memory>

#include <spdlog/formatter.h>
#include <spdlog/pattern_formatter.h>

namespace seam {
namespace {

thread_local LogFields scoped_fields;

void AppendJsonString(std::string_view s, spdlog::memory_buf_t& out) {
  out.push_back('"');
  for (unsigned char c : s) {
    switch (c) {
      case '"': out.append(std::string_view("\\\"")); break;
      case '\\': out.append(std::string_view("\\\\")); break;
      case '\n': out.append(std::string_view("\\n")); break;
      case '\r': out.append(std::string_view("\\r")); break;
      case '\t': out.append(std::string_view("\\t")); break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          out.append(std::string_view(buf));
        } else {
          out.push_back(static_cast<char>(c));
        }
    }
  }
  out.push_back('"');
}

// Whether `s` is a JSON number as a field's value may be ("8", "0.0125",
// "-3e-05"); identifiers ("request_id": digits or not) stay strings.
bool IsJsonNumber(std::string_view key, std::string_view s) {
  if (key.size() >= 2 && (key.substr(key.size() - 2) == "id" || (key.size() >= 3 && key.substr(key.size() - 3) == "ids"))) {
    return false;
  }
  size_t i = 0;
  const auto digits = [&] {
    const size_t start = i;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i;
    return i > start;
  };
  if (i < s.size() && s[i] == '-') ++i;
  if (i >= s.size() || (s[i] == '0' && i + 1 < s.size() && s[i + 1] >= '0' && s[i + 1] <= '9')) return false;
  if (!digits()) return false;
  if (i < s.size() && s[i] == '.' && (++i, !digits())) return false;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
    if (!digits()) return false;
  }
  return i == s.size();
}

// Text: "[time] [process] [level] message key=value ...".
class TextFormatter final : public spdlog::formatter {
 public:
  explicit TextFormatter(std::string process)
      : process_(process),
        pattern_(std::make_unique<spdlog::pattern_formatter>(
            process.empty() ? "[%H:%M:%S.%e] [%^%l%$] %v" : "[%H:%M:%S.%e] [" + process + "] [%^%l%$] %v",
            spdlog::pattern_time_type::local, "")) {}
  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override {
    pattern_->format(msg, dest);
    for (const auto& [key, value] : scoped_fields) {
      dest.push_back(' ');
      dest.append(key);
      dest.push_back('=');
      dest.append(value);
    }
    dest.push_back('\n');
  }
  std::unique_ptr<spdlog::formatter> clone() const override { return std::make_unique<TextFormatter>(process_); }

 private:
  std::string process_;
  std::unique_ptr<spdlog::pattern_formatter> pattern_;
};

// JSON: one object per line; the time in UTC, RFC 3339 with milliseconds;
// a field's value that is a number is written as one.
class JsonFormatter final : public spdlog::formatter {
 public:
  explicit JsonFormatter(std::string process) : process_(std::move(process)) {}
  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override {
    const auto since = msg.time.time_since_epoch();
    const std::time_t seconds = std::chrono::duration_cast<std::chrono::seconds>(since).count();
    const int millis = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(since).count() % 1000);
    std::tm utc{};
    gmtime_r(&seconds, &utc);
    char time[40];
    const size_t n = std::strftime(time, sizeof(time), "%Y-%m-%dT%H:%M:%S", &utc);
    std::snprintf(time + n, sizeof(time) - n, ".%03dZ", millis);
    dest.append(std::string_view("{\"time\":\""));
    dest.append(std::string_view(time));
    dest.append(std::string_view("\",\"level\":"));
    const auto level = spdlog::level::to_string_view(msg.level);
    AppendJsonString(std::string_view(level.data(), level.size()), dest);
    dest.append(std::string_view(",\"process\":"));
    AppendJsonString(process_, dest);
    dest.append(std::string_view(",\"msg\":"));
    AppendJsonString(std::string_view(msg.payload.data(), msg.payload.size()), dest);
    for (const auto& [key, value] : scoped_fields) {
      dest.push_back(',');
      AppendJsonString(key, dest);
      dest.push_back(':');
      if (IsJsonNumber(key, value)) {
        dest.append(std::string_view(value));
      } else {
        AppendJsonString(value, dest);
      }
    }
    dest.append(std::string_view("}\n"));
  }
  std::unique_ptr<spdlog::formatter> clone() const override { return std::make_unique<JsonFormatter>(process_); }

 private:
  std::string process_;
};

}  // namespace

bool ParseLogFormat(const std::string& text, LogFormat* format) {
  if (text == "text") return *format = LogFormat::kText, true;
  if (text == "json") return *format = LogFormat::kJson, true;
  return false;
}

void InitLogging(const std::string& level, const std::string& process, LogFormat format) {
  const char* env = std::getenv("SEAM_LOG_LEVEL");
  const std::string chosen = env != nullptr ? env : level;
  spdlog::set_level(spdlog::level::from_str(chosen));
  const char* env_format = std::getenv("SEAM_LOG_FORMAT");
  if (env_format != nullptr) ParseLogFormat(env_format, &format);
  if (format == LogFormat::kJson) {
    spdlog::set_formatter(std::make_unique<JsonFormatter>(process));
  } else {
    spdlog::set_formatter(std::make_unique<TextFormatter>(process));
  }
}

ScopedLogFields::ScopedLogFields(LogFields fields) : added_(fields.size()) {
  for (auto& f : fields) scoped_fields.push_back(std::move(f));
}

ScopedLogFields::~ScopedLogFields() { scoped_fields.resize(scoped_fields.size() - added_); }

}  // namespace seam
