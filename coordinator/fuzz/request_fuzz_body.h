// The body of the request validation fuzz target, shared by the libFuzzer
// entry (request_fuzz.cc, clang) and the corpus replay test (any compiler):
// bytes, as a client sends them, parsed as a GenerateRequest and as a
// ScoreRequest (their first two fields share numbers), each validated under
// kFuzzLimits.
#pragma once

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "service/request_validation.h"

namespace seam::coordinator::fuzz {

// Small enough that inputs cross every limit.
inline constexpr RequestLimits kFuzzLimits{/*vocab_size=*/1000, /*max_positions=*/64, /*max_prompt_tokens=*/32,
                                           /*default_max_new_tokens=*/16, /*max_prompts=*/4,
                                           /*max_request_id_bytes=*/16, /*max_stop_tokens=*/4};

// The code ValidateGenerateRequest gives the request in `bytes`;
// INVALID_ARGUMENT too when the bytes are not a GenerateRequest.
absl::StatusCode GenerateCode(absl::string_view bytes);

// OK when each validation either refuses with INVALID_ARGUMENT or accepts a
// request that keeps every limit, as checked here independently; INTERNAL
// naming the broken property otherwise.
absl::Status CheckRequestProperties(absl::string_view bytes);

}  // namespace seam::coordinator::fuzz
