// source_commit.h: the commit written into the build.
#include "source_commit.h"

#include "seam_source_commit.h"

namespace seam::cli {

std::string SourceCommit() { return SEAM_SOURCE_COMMIT; }

}  // namespace seam::cli
