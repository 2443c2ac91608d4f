// POST /v1/completions and /v1/chat/completions: parse, validate, hand the
// call to the driver, then answer once it is done or stream its chunks.
// Every answer, refusals included, carries the server's request id in the
// X-Server-Request-Id header (and in the OpenAI id: "cmpl-req-..." or
// "chatcmpl-req-..."); a client's X-Request-Id is echoed back, cut to the
// validated length, and logged as client_request_id.
#pragma once

#include <string>


#include "http/openai_server.h"
#include "seam/http_server/http_message.h"

namespace seam::coordinator::http {

struct GenerationContext {
  const OpenAiBackend* backend = nullptr;
  std::string model_name;
};

inline constexpr char kServerRequestIdHeader[] = "X-Server-Request-Id";
inline constexpr char kClientRequestIdHeader[] = "X-Request-Id";

void ServeGeneration(const GenerationContext& context, bool chat, const http_server::Request& request,
                     http_server::Response& response);

// Sets an OpenAI-style error answer for `status` (not OK).
void SetError(http_server::Response& response, const absl::Status& status);

}  // namespace seam::coordinator::http
