// The body of the chat template fuzz target, shared by the libFuzzer entry
// (chat_template_fuzz.cc, clang) and the corpus replay test (any compiler):
// the bytes are a template source, as tokenizer_config.json supplies it;
// a parsed template is rendered with a fixed conversation.
#pragma once

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace seam::chat_template::fuzz {

// The code of parsing `source` and, when it parses, rendering the fixed
// conversation with it.
absl::StatusCode RenderCode(absl::string_view source);

// OK when Parse and Render each either refuse with INVALID_ARGUMENT or
// succeed; INTERNAL naming the broken property otherwise.
absl::Status CheckTemplateProperties(absl::string_view source);

}  // namespace seam::chat_template::fuzz
