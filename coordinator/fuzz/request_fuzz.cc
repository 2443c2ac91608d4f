// libFuzzer entry for client request validation (built with SEAM_FUZZ=ON
// under clang). Run: request_fuzz coordinator/fuzz/request_corpus
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "google/protobuf/stubs/logging.h"

#include "fuzz/request_fuzz_body.h"

// Refusals are the expected outcome here: keep protobuf's parse complaints
// (invalid UTF-8 in a string field) off stderr, where they slow the run.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  google::protobuf::SetLogHandler(nullptr);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::Status status =
      seam::coordinator::fuzz::CheckRequestProperties(absl::string_view(reinterpret_cast<const char*>(data), size));
  if (!status.ok()) {
    std::fprintf(stderr, "request validation property broken: %s\n", status.ToString().c_str());
    std::abort();
  }
  return 0;
}
