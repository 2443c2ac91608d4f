#include "command_status.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace seam::cli {

int ExitCode(const absl::Status& status) {
  if (status.ok()) return 0;
  return status.code() == absl::StatusCode::kInvalidArgument ? 2 : 1;
}

int ReportStatus(absl::string_view command, const absl::Status& status, std::ostream& err) {
  if (!status.ok()) {
    const absl::string_view message = status.message();
    err << command << ": " << message << (absl::EndsWith(message, "\n") ? "" : "\n");
  }
  return ExitCode(status);
}

absl::Status Described(absl::string_view context, const absl::Status& status) {
  return absl::Status(status.code(), absl::StrCat(context, status.ToString()));
}

absl::StatusCode AfterFlags(absl::StatusCode code) {
  return code == absl::StatusCode::kInvalidArgument ? absl::StatusCode::kFailedPrecondition : code;
}

absl::Status Failed(absl::string_view context, const absl::Status& status) {
  return absl::Status(AfterFlags(status.code()), absl::StrCat(context, status.ToString()));
}

}  // namespace seam::cli
