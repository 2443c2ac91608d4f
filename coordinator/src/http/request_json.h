// A request body read as JSON within bounds, so that a body under the size
// limit cannot make its parse take many times its size: nesting at most
// max_depth deep and at most max_values values in all (each value costs the
// parser tens of bytes however few bytes it takes in the body; 8 MB of "["
// took ~70 times its size with an unbounded parse). nlohmann's SAX parser
// drives a handler that builds the document and stops at the first bound
// passed, before allocating for it. Strings and keys are bounded by the body.
#pragma once

#include <cstddef>
#include <string>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "service/request_validation.h"

namespace seam::coordinator::http {

struct JsonBounds {
  int max_depth = 32;
  size_t max_values = 1 << 17;
};

// The bounds of a request under `limits`: room for every prompt given as
// token ids (max_prompts x max_prompt_tokens), and 4096 values more.
JsonBounds RequestJsonBounds(const RequestLimits& limits);

// INVALID_ARGUMENT "the request body is not valid JSON", or naming the bound
// passed ("nests deeper than 32 levels", "holds more than N values").
absl::StatusOr<nlohmann::ordered_json> ParseBoundedJson(const std::string& text, const JsonBounds& bounds);

}  // namespace seam::coordinator::http
