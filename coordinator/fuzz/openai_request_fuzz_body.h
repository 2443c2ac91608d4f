// The body of the OpenAI request fuzz target, shared by the libFuzzer entry
// (openai_request_fuzz.cc, clang) and the corpus replay test (any compiler):
// bytes as an HTTP client posts them to /v1/completions and
// /v1/chat/completions, read by ParseOpenAiRequest (the bounded JSON parse,
// Qwen3's real tokenizer and chat template) as both, and what it accepts
// validated as the gRPC API would (ValidateGenerateRequest) under
// kOpenAiFuzzLimits.
#pragma once

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "service/request_validation.h"

namespace seam::coordinator::fuzz {

// Small enough that inputs cross every limit.
inline constexpr RequestLimits kOpenAiFuzzLimits{/*vocab_size=*/151936, /*max_positions=*/256,
                                                 /*max_prompt_tokens=*/64, /*default_max_new_tokens=*/16,
                                                 /*max_prompts=*/4, /*max_request_id_bytes=*/16,
                                                 /*max_stop_tokens=*/8};

// The code the parse gives `bytes`: as a chat request when they mention
// "messages", as a completion request otherwise.
absl::StatusCode OpenAiRequestCode(absl::string_view bytes);

// OK when both parses refuse with INVALID_ARGUMENT or FAILED_PRECONDITION,
// or accept a request that keeps the limits (checked here independently)
// and that ValidateGenerateRequest accepts or refuses with INVALID_ARGUMENT;
// INTERNAL naming the broken property otherwise.
absl::Status CheckOpenAiRequestProperties(absl::string_view bytes);

}  // namespace seam::coordinator::fuzz
