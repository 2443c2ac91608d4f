// Status helpers shared by every seam library.
// Recoverable errors travel as absl::Status / absl::StatusOr; invariants use
// SEAM_CHECK, which aborts with the condition, file and line.
#pragma once

#include <cstdlib>
#include <sstream>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

#define SEAM_STATUS_CONCAT_INNER_(a, b) a##b
#define SEAM_STATUS_CONCAT_(a, b) SEAM_STATUS_CONCAT_INNER_(a, b)

// Returns from the enclosing function when `expr` yields a non-OK status.
#define SEAM_RETURN_IF_ERROR(expr)                      \
  do {                                                  \
    ::absl::Status _seam_status = (expr);               \
    if (!_seam_status.ok()) return _seam_status;        \
  } while (0)

// `SEAM_ASSIGN_OR_RETURN(auto x, MakeX());` binds the value or returns the error.
#define SEAM_ASSIGN_OR_RETURN(lhs, rexpr) \
  SEAM_ASSIGN_OR_RETURN_IMPL_(SEAM_STATUS_CONCAT_(_seam_statusor_, __LINE__), lhs, rexpr)
#define SEAM_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, rexpr) \
  auto tmp = (rexpr);                                \
  if (!tmp.ok()) return tmp.status();                \
  lhs = std::move(tmp).value()

namespace seam {

[[noreturn]] void CheckFailed(const char* cond, const char* file, int line, const std::string& msg);

// Adds context to a status message while keeping its code and payloads: "<context>: <message>".
absl::Status Annotate(const absl::Status& status, absl::string_view context);

}  // namespace seam

// Invariant check: aborts the process with the failed condition and location.
#define SEAM_CHECK(cond)                                                       \
  do {                                                                         \
    if (!(cond)) ::seam::CheckFailed(#cond, __FILE__, __LINE__, std::string()); \
  } while (0)
#define SEAM_CHECK_MSG(cond, ...)                                                   \
  do {                                                                              \
    if (!(cond)) ::seam::CheckFailed(#cond, __FILE__, __LINE__, ::absl::StrCat(__VA_ARGS__)); \
  } while (0)
// Aborts if a Status expression is not OK (for setup code where failure is a bug).
#define SEAM_CHECK_OK(expr)                                                         \
  do {                                                                              \
    ::absl::Status _seam_s = (expr);                                                \
    if (!_seam_s.ok()) ::seam::CheckFailed(#expr, __FILE__, __LINE__, _seam_s.ToString()); \
  } while (0)
