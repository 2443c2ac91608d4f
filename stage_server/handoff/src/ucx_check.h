// Wraps UCX calls so a failure becomes an absl::Status naming the call, the
// file and the line, e.g. "ucp_init(...) failed at ucx_worker.cc:40: No such device".
// Internal to seam_handoff: nothing outside stage_server/handoff includes UCX.
#pragma once

#include <ucs/type/status.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace seam::handoff {

// The Status code a caller should act on for a UCX error: retry elsewhere
// (UNAVAILABLE), wait less (DEADLINE_EXCEEDED), free memory (RESOURCE_EXHAUSTED).
inline absl::StatusCode UcsToStatusCode(ucs_status_t status) {
  switch (status) {
    case UCS_OK: return absl::StatusCode::kOk;
    case UCS_ERR_TIMED_OUT: return absl::StatusCode::kDeadlineExceeded;
    case UCS_ERR_CONNECTION_RESET:
    case UCS_ERR_UNREACHABLE:
    case UCS_ERR_ENDPOINT_TIMEOUT:
    case UCS_ERR_CANCELED: return absl::StatusCode::kUnavailable;
    case UCS_ERR_NO_MEMORY: return absl::StatusCode::kResourceExhausted;
    case UCS_ERR_MESSAGE_TRUNCATED: return absl::StatusCode::kOutOfRange;
    case UCS_ERR_INVALID_PARAM: return absl::StatusCode::kInvalidArgument;
    default: return absl::StatusCode::kInternal;
  }
}

// `context` names what failed (usually the call text); file and line locate it.
inline absl::Status UcsStatus(ucs_status_t status, absl::string_view context, const char* file, int line) {
  if (status == UCS_OK) return absl::OkStatus();
  absl::string_view base = file;
  const size_t slash = base.rfind('/');
  if (slash != absl::string_view::npos) base.remove_prefix(slash + 1);
  return absl::Status(UcsToStatusCode(status),
                      absl::StrCat(context, " failed at ", base, ":", line, ": ", ucs_status_string(status)));
}

}  // namespace seam::handoff

#define SEAM_UCS_STATUS(call) ::seam::handoff::UcsStatus((call), #call, __FILE__, __LINE__)
#define SEAM_UCS_RETURN_IF_ERROR(call)                   \
  do {                                                   \
    ::absl::Status _seam_ucs_s = SEAM_UCS_STATUS(call);  \
    if (!_seam_ucs_s.ok()) return _seam_ucs_s;           \
  } while (0)
