#include "seam/core/temp_dir.h"

#include <errno.h>
#include <stdlib.h>

#include "absl/strings/str_cat.h"

namespace seam {

absl::StatusOr<std::string> MakeTempDir(const std::string& prefix) {
  const char* base = getenv("TMPDIR");
  std::string pattern = absl::StrCat(base != nullptr && *base != '\0' ? base : "/tmp", "/", prefix, "XXXXXX");
  if (mkdtemp(pattern.data()) == nullptr) {
    const int error = errno;
    return absl::ErrnoToStatus(error, absl::StrCat("cannot create a directory ", pattern));
  }
  return pattern;
}

}  // namespace seam
