// The audit of every field of an OpenAI request body: each field the
// completions and chat schemas define (and the vLLM extras seam reads) is
// either implemented (read by openai_request.cc), without effect on the
// answer (user, metadata, prompt_cache_key, ...), or refused by name when
// set to anything but its default (echo, suffix, best_of, tools,
// response_format other than text, audio, ...). A field neither schema
// defines is refused by name too. The table is docs/SERVING.md's.
#pragma once

#include <nlohmann/json.hpp>

#include "absl/status/status.h"

namespace seam::coordinator::http {

// INVALID_ARGUMENT "'<field>' ..." for the first field `body` sets that
// seam does not implement; OK otherwise. `chat`: /v1/chat/completions.
absl::Status CheckOpenAiFields(const nlohmann::ordered_json& body, bool chat);

}  // namespace seam::coordinator::http
