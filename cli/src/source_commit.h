// The commit a benchmark ran, for its JSON report: the short commit of the
// tree the binary was built from, with "-modified" when its tracked files
// differed from that commit (cmake/SourceCommit.cmake, refreshed at every
// build), or "unknown" when it was built outside a git checkout. It names the
// binary's source even where the binary runs on another machine, whose own
// checkout may be older.
#pragma once

#include <string>

namespace seam::cli {

std::string SourceCommit();

}  // namespace seam::cli
