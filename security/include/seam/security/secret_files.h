// Reading the files that hold secrets and certificates, and writing them
// readable by their owner only.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace seam::security {

// The whole file. NOT_FOUND / PERMISSION_DENIED / ... from errno, naming
// `what` (the flag, e.g. "--tls-cert") and the path.
absl::StatusOr<std::string> ReadFileForFlag(const std::string& path, const std::string& what);

// A bearer token file: its content without surrounding whitespace (a trailing
// newline is usual). INVALID_ARGUMENT when empty, or when the token holds
// characters that cannot travel in a gRPC metadata value (control
// characters, spaces).
absl::StatusOr<std::string> ReadTokenFile(const std::string& path, const std::string& what);

// Writes `content` to `path` created with mode 0600 (replacing a file there).
absl::Status WritePrivateFile(const std::string& path, const std::string& content);

}  // namespace seam::security
