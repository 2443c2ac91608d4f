// libFuzzer entry for tokenizer.json / tokenizer_config.json loading (built
// with SEAM_FUZZ=ON under clang). Run: tokenizer_fuzz tokenizer/fuzz/corpus
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "fuzz/tokenizer_fuzz_body.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::Status status =
      seam::tokenizer::fuzz::CheckTokenizerProperties(absl::string_view(reinterpret_cast<const char*>(data), size));
  if (!status.ok()) {
    std::fprintf(stderr, "tokenizer property broken: %s\n", status.ToString().c_str());
    std::abort();
  }
  return 0;
}
