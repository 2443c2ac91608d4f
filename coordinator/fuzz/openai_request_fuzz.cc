// libFuzzer entry for the OpenAI request path (built with SEAM_FUZZ=ON under
// clang). Run: openai_request_fuzz coordinator/fuzz/openai_request_corpus
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "fuzz/openai_request_fuzz_body.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::Status status = seam::coordinator::fuzz::CheckOpenAiRequestProperties(
      absl::string_view(reinterpret_cast<const char*>(data), size));
  if (!status.ok()) {
    std::fprintf(stderr, "OpenAI request property broken: %s\n", status.ToString().c_str());
    std::abort();
  }
  return 0;
}
