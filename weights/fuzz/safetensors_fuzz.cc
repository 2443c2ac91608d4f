// libFuzzer entry for safetensors parsing (built with SEAM_FUZZ=ON under clang).
// Run: safetensors_fuzz weights/fuzz/safetensors_corpus
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "fuzz/weights_fuzz_body.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::Status status =
      seam::weights::fuzz::CheckSafetensorsProperties(absl::string_view(reinterpret_cast<const char*>(data), size));
  if (!status.ok()) {
    std::fprintf(stderr, "safetensors property broken: %s\n", status.ToString().c_str());
    std::abort();
  }
  return 0;
}
