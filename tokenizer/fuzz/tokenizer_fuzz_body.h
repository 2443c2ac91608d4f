// The body of the tokenizer fuzz target, shared by the libFuzzer entry
// (tokenizer_fuzz.cc, clang) and the corpus replay test (any compiler): the
// bytes up to the first NUL are a tokenizer.json text, those after it a
// tokenizer_config.json text (none without a NUL), both user-supplied files.
#pragma once

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace seam::tokenizer::fuzz {

// The code Tokenizer::FromJson gives the texts in `bytes`.
absl::StatusCode LoadCode(absl::string_view bytes);

// OK when FromJson either refuses with INVALID_ARGUMENT or loads a tokenizer
// that encodes fixed texts (and the input itself) to ids inside its
// vocabulary that decode without error; INTERNAL naming the broken property
// otherwise.
absl::Status CheckTokenizerProperties(absl::string_view bytes);

}  // namespace seam::tokenizer::fuzz
