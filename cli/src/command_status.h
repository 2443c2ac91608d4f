// How a `seam` command's result reaches the shell. Each command returns an
// absl::Status whose code says what its caller should do; main prints a
// failure as "seam <command>: <message>" on stderr and exits with ExitCode.
#pragma once

#include <ostream>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace seam::cli {

// The exit code every command documents: 0 OK; 2 INVALID_ARGUMENT (fix the
// flags); 1 any other failure (a mismatch, a failed run, a peer down, ...).
int ExitCode(const absl::Status& status);

// Prints "<command>: <message>" on `err` when `status` is an error (ending
// in one newline) and returns ExitCode(status).
int ReportStatus(absl::string_view command, const absl::Status& status, std::ostream& err);

// `status` with "<context>" and its code's name in front of its message
// ("<context>NOT_FOUND: ..."), the code kept.
absl::Status Described(absl::string_view context, const absl::Status& status);

// The code of work that failed after the flags were accepted: `code`, but an
// INVALID_ARGUMENT from below becomes FAILED_PRECONDITION (exit 1, not 2):
// the flags were fine, the model or the peer they met did not admit the work.
absl::StatusCode AfterFlags(absl::StatusCode code);
// Described(context, status) with AfterFlags(status.code()).
absl::Status Failed(absl::string_view context, const absl::Status& status);

}  // namespace seam::cli
