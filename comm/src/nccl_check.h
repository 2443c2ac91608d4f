// Wraps NCCL calls so a failure becomes a Status naming the call, the file
// and the line, plus NCCL's last error text. ncclInProgress (a non-blocking
// communicator still working) is not an error: the caller waits for it.
#pragma once

#include <nccl.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace seam::comm::internal {

inline absl::StatusCode NcclCode(ncclResult_t r) {
  switch (r) {
    case ncclInvalidArgument:
    case ncclInvalidUsage: return absl::StatusCode::kInvalidArgument;
    case ncclSystemError:
    case ncclRemoteError: return absl::StatusCode::kUnavailable;
    default: return absl::StatusCode::kInternal;
  }
}

inline absl::Status NcclStatus(ncclResult_t r, const char* call, const char* file, int line) {
  if (r == ncclSuccess || r == ncclInProgress) return absl::OkStatus();
  const char* last = ncclGetLastError(nullptr);
  return absl::Status(NcclCode(r), absl::StrCat(call, " failed at ", file, ":", line, ": ", ncclGetErrorString(r),
                                                last != nullptr && *last != '\0' ? absl::StrCat(" (", last, ")") : ""));
}

}  // namespace seam::comm::internal

#define SEAM_NCCL_STATUS(call) ::seam::comm::internal::NcclStatus((call), #call, __FILE__, __LINE__)
#define SEAM_NCCL_RETURN_IF_ERROR(call)                    \
  do {                                                     \
    ::absl::Status _seam_nccl_s = SEAM_NCCL_STATUS(call);  \
    if (!_seam_nccl_s.ok()) return _seam_nccl_s;           \
  } while (0)
