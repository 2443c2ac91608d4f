// libFuzzer entry for chat template parsing and rendering (built
// with SEAM_FUZZ=ON under clang). Run: chat_template_fuzz chat_template/fuzz/corpus
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "fuzz/chat_template_fuzz_body.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::Status status =
      seam::chat_template::fuzz::CheckTemplateProperties(absl::string_view(reinterpret_cast<const char*>(data), size));
  if (!status.ok()) {
    std::fprintf(stderr, "chat template property broken: %s\n", status.ToString().c_str());
    std::abort();
  }
  return 0;
}
