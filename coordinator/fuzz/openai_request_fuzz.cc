// libFuzzer entry for the OpenAI request path (built with SEAM_FUZZ=ON under
// clang). Run: openai_request_fuzz coordinator/fuzz/openai_request_corpus
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "fuzz/openai_request_fuzz_body.h"

// Loads the tokenizer and chat template (seconds) before the first input,
// so that their load is never timed as an input's run.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  (void)seam::coordinator::fuzz::CheckOpenAiRequestProperties("{}");
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::Status status = seam::coordinator::fuzz::CheckOpenAiRequestProperties(
      absl::string_view(reinterpret_cast<const char*>(data), size));
  if (!status.ok()) {
    std::fprintf(stderr, "OpenAI request property broken: %s\n", status.ToString().c_str());
    std::abort();
  }
  return 0;
}
