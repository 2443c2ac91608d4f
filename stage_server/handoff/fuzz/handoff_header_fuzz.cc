// libFuzzer entry for handoff header checks (built with SEAM_FUZZ=ON under
// clang). Run: handoff_header_fuzz stage_server/handoff/fuzz/corpus
// (copy the corpus first if new inputs should not land in the tree).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "fuzz/handoff_header_fuzz_body.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::Status status =
      seam::handoff::fuzz::CheckHeaderProperties(absl::string_view(reinterpret_cast<const char*>(data), size));
  if (!status.ok()) {
    std::fprintf(stderr, "handoff header property broken: %s\n", status.ToString().c_str());
    std::abort();
  }
  return 0;
}
