// How `seam bench load` sends one request and times its answer, over the
// coordinator's gRPC API (seam.v1.Coordinator/Generate: token ids streamed
// as they are made) or its OpenAI-compatible HTTP API (POST /v1/completions
// with a token-id prompt, max_tokens, ignore_eos and stream: server-sent
// events carrying text, then the usage). A transport is shared by every
// session thread; each thread makes its own LoadClient (an HTTP client keeps
// its connection between a conversation's turns). CancelAll may be called
// from any thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "latency_stats.h"
#include "seam/security/credentials.h"

namespace seam::cli {

using LoadClock = std::chrono::steady_clock;

struct LoadRequest {
  std::string id;  // names the request in errors and the server's logs
  std::vector<int32_t> prompt;
  int64_t max_tokens = 1;
  double timeout_s = 600;  // the call's deadline from its start
};

// What the client saw of one answer. Times are seconds since the run's t0.
struct LoadAnswer {
  // gRPC: every response with tokens and how many it carried. HTTP: every
  // chunk of the choice that carried text, one "token" each (the chunks
  // carry text, not ids or counts), and none at all when the model has no
  // tokenizer.json (the stream then holds no text before its end).
  std::vector<TokenArrival> arrivals;
  bool per_token = true;            // arrivals count tokens (gRPC), not chunks (HTTP)
  std::vector<int32_t> token_ids;   // gRPC: the tokens made; HTTP: empty (the API returns text)
  int64_t output_tokens = 0;        // gRPC: counted; HTTP: the usage's completion_tokens
  double end_seconds = 0;           // when the answer was complete
};

class LoadClient {
 public:
  virtual ~LoadClient() = default;
  // Sends `request` and reads its whole answer. The error names the request
  // and what failed (the gRPC code, the HTTP status and body, an error
  // event, a deadline); CANCELLED after CancelAll.
  virtual absl::StatusOr<LoadAnswer> Send(const LoadRequest& request, LoadClock::time_point t0) = 0;
};

class LoadTransport {
 public:
  virtual ~LoadTransport() = default;
  virtual std::string name() const = 0;  // "grpc" or "http"
  virtual std::unique_ptr<LoadClient> NewClient() = 0;
  // Ends every call in flight and makes later ones fail at once.
  virtual void CancelAll() = 0;
};

// The coordinator's gRPC API at `address` (HOST:PORT) with `security`.
absl::StatusOr<std::unique_ptr<LoadTransport>> MakeGrpcLoadTransport(const std::string& address,
                                                                    const security::ClientSecurityOptions& security);

// The HTTP API at `address` (HOST:PORT): HTTPS trusting security.tls_ca_file
// when it is set, the bearer token of security.auth_token_file when set.
// INVALID_ARGUMENT for an unreadable token or a client certificate (the HTTP
// API takes none).
absl::StatusOr<std::unique_ptr<LoadTransport>> MakeHttpLoadTransport(const std::string& address,
                                                                    const security::ClientSecurityOptions& security);

}  // namespace seam::cli
