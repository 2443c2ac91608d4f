// MakeTempDir: a fresh, empty directory of one's own under $TMPDIR (or /tmp),
// for rendezvous files, logs and scratch checkpoints. The caller owns it and
// removes it when done; nothing here cleans up.
#pragma once

#include <string>

#include "absl/status/statusor.h"

namespace seam {

// Creates "<$TMPDIR or /tmp>/<prefix>XXXXXX" (six random characters) with
// mode 0700 and returns its path. Errors carry mkdtemp's errno as the code
// (NOT_FOUND: the base directory is missing, PERMISSION_DENIED, ...) and name
// the pattern.
absl::StatusOr<std::string> MakeTempDir(const std::string& prefix);

}  // namespace seam
