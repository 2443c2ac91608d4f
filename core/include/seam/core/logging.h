// Process-wide logging through spdlog. Call InitLogging once from main();
// libraries log with SEAM_LOG_* and never configure sinks themselves.
#pragma once

#include <string>

// Debug lines are compiled in and filtered by the level chosen at run time
// (spdlog compiles everything below info out by default).
#ifndef SPDLOG_ACTIVE_LEVEL
#define SPDLOG_ACTIVE_LEVEL SPDLOG_LEVEL_DEBUG
#endif
#include <spdlog/spdlog.h>

namespace seam {

// Sets the level ("trace", "debug", "info", "warn", "error") and a prefix such
// as "stage 1" that every line carries. Honours SEAM_LOG_LEVEL if set.
void InitLogging(const std::string& level, const std::string& prefix);

}  // namespace seam

#define SEAM_LOG_DEBUG(...) SPDLOG_DEBUG(__VA_ARGS__)
#define SEAM_LOG_INFO(...) SPDLOG_INFO(__VA_ARGS__)
#define SEAM_LOG_WARN(...) SPDLOG_WARN(__VA_ARGS__)
#define SEAM_LOG_ERROR(...) SPDLOG_ERROR(__VA_ARGS__)
