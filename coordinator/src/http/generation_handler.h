// POST /v1/completions and /v1/chat/completions: parse, validate, hand the
// call to the driver, then answer once it is done or stream its chunks.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include <httplib.h>

#include "http/openai_server.h"

namespace seam::coordinator::http {

struct GenerationContext {
  const OpenAiBackend* backend = nullptr;
  std::string model_name;
  std::atomic<uint64_t>* next_id = nullptr;  // numbers the answers' ids
};

void ServeGeneration(const GenerationContext& context, bool chat, const httplib::Request& request,
                     httplib::Response& response);

// Sets an OpenAI-style error answer for `status` (not OK).
void SetError(httplib::Response& response, const absl::Status& status);

}  // namespace seam::coordinator::http
