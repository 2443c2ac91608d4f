// Process-wide logging through spdlog. Call InitLogging once from main();
// libraries log with SEAM_LOG_* and never configure sinks themselves.
// Lines about one thing (a request) carry its fields: a ScopedLogFields on
// the logging thread adds them to every line logged while it lives, as
// `key=value` after the text, or as JSON members with --log-format json.
#pragma once

#include <string>
#include <utility>
#include <vector>

// Debug lines are compiled in and filtered by the level chosen at run time
// (spdlog compiles everything below info out by default).
#ifndef SPDLOG_ACTIVE_LEVEL
#define SPDLOG_ACTIVE_LEVEL SPDLOG_LEVEL_DEBUG
#endif
#include <spdlog/spdlog.h>

namespace seam {

enum class LogFormat { kText, kJson };
// "text" or "json"; false for anything else.
bool ParseLogFormat(const std::string& text, LogFormat* format);

// Sets the level ("trace", "debug", "info", "warn", "error"), the format
// and the process name that every line carries ("stage", "coordinator",
// "seam"). Honours SEAM_LOG_LEVEL and SEAM_LOG_FORMAT if set. JSON lines are
// one object each: {"time","level","process","msg", then the scope's fields}
// (a field's numeric value as a JSON number, except identifiers: keys
// ending in "id" or "ids" stay strings).
void InitLogging(const std::string& level, const std::string& process, LogFormat format = LogFormat::kText);

using LogFields = std::vector<std::pair<std::string, std::string>>;

// Adds `fields` to every line this thread logs until destroyed (nested
// scopes add theirs after the outer ones). Not movable.
class ScopedLogFields {
 public:
  explicit ScopedLogFields(LogFields fields);
  ~ScopedLogFields();
  ScopedLogFields(const ScopedLogFields&) = delete;
  ScopedLogFields& operator=(const ScopedLogFields&) = delete;

 private:
  size_t added_;
};

}  // namespace seam

#define SEAM_LOG_DEBUG(...) SPDLOG_DEBUG(__VA_ARGS__)
#define SEAM_LOG_INFO(...) SPDLOG_INFO(__VA_ARGS__)
#define SEAM_LOG_WARN(...) SPDLOG_WARN(__VA_ARGS__)
#define SEAM_LOG_ERROR(...) SPDLOG_ERROR(__VA_ARGS__)
