// The commit a benchmark ran, for its JSON report: `git rev-parse --short
// HEAD` in the working directory, "unknown" outside a git checkout.
#pragma once

#include <string>

namespace seam::cli {

std::string SourceCommit();

}  // namespace seam::cli
