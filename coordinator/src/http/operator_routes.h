// The HTTP API's routes beside generation that vLLM users and their tools
// call: POST /tokenize and /detokenize (the model's tokenizer; 400 without
// one), GET /version, GET /v1/models/{id} (404 for another model's id) and,
// when the coordinator is told to (--metrics-on-http), GET /metrics with the
// same exposition as its metrics port. Every route but /health sits behind
// the bearer token (OpenAiServer's gate). Bodies are bounded JSON; a field
// these routes do not implement is refused by name (400).
#pragma once

#include <string>
#include <vector>

#include "http/openai_server.h"
#include "seam/http_server/http_server.h"

namespace seam::coordinator::http {

// The routes, reading the model's name and creation time and `backend`
// (which must outlive them).
std::vector<http_server::Route> OperatorRoutes(const std::string& model_name, const int64_t* created,
                                               const OpenAiBackend* backend);

}  // namespace seam::coordinator::http
