#include "seam/core/status.h"

#include <cstdio>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"

namespace seam {

void CheckFailed(const char* cond, const char* file, int line, const std::string& msg) {
  std::fprintf(stderr, "seam: check failed at %s:%d: %s%s%s\n", file, line, cond,
               msg.empty() ? "" : ": ", msg.c_str());
  std::fflush(stderr);
  std::abort();
}

absl::Status Annotate(const absl::Status& status, absl::string_view context) {
  if (status.ok()) return status;
  absl::Status annotated(status.code(), absl::StrCat(context, ": ", status.message()));
  status.ForEachPayload(
      [&](absl::string_view type_url, const absl::Cord& payload) { annotated.SetPayload(type_url, payload); });
  return annotated;
}

}  // namespace seam
