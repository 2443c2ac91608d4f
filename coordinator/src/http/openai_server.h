// The OpenAI-compatible HTTP front end of seam-coordinator (--http-listen):
// POST /v1/completions and /v1/chat/completions (server-sent events with
// "stream": true), GET /v1/models and GET /health, on seam's HTTP listener
// (http_server/: libmicrohttpd's event loops, bounded connections, head
// deadline, bodies bounded before they are buffered, exclusive bind).
// Requests take the same path as the gRPC API: the same validation and
// limits (ValidateGenerateRequest), then the PipelineDriver; the same bearer
// token (Authorization: Bearer, every path but /health), checked on the
// request head before any body byte is read; TLS with the same certificate,
// plaintext only on loopback or with --insecure. Each request is served on
// one worker thread of the listener's pool once it is whole, which waits
// for the driver's callbacks (the driver itself never waits on HTTP).
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "pipeline_driver.h"
#include "seam/security/credentials.h"
#include "service/model_text.h"
#include "service/request_metrics.h"
#include "service/request_validation.h"

namespace seam::coordinator::http {

struct OpenAiServerOptions {
  std::string listen;                        // HOST:PORT; port 0 picks a free one
  security::ServerSecurityOptions security;  // tls_cert/key (+ client CA), token, insecure
  std::string model_name;                    // the one model of /v1/models; requests naming another get 404
  // Requests served at once: each holds a worker thread while it runs (a
  // stream for its whole life), so this bounds the HTTP API's concurrency;
  // more wait for a worker. As many as the scheduler's sequences in a
  // microbatch and more, so the HTTP API keeps a full batch in flight.
  int threads = 256;
  size_t max_body_bytes = 8 << 20;           // every transfer encoding, checked before buffering
  unsigned max_connections = 1024;           // in all, idle ones included
  unsigned max_connections_per_address = 256;
  absl::Duration head_timeout = absl::Seconds(10);  // accept to the end of the request head, TLS included
};

// What the front end serves from; every pointer must outlive the server.
struct OpenAiBackend {
  PipelineDriver* driver = nullptr;
  RequestLimits limits;
  const ModelText* text = nullptr;  // null: no tokenizer, token-id prompts only
  // Counts every call in the request metrics, as gRPC calls are counted
  // (MeteredCall); null: no --metrics-listen, only the completion line is logged.
  CoordinatorMetrics* metrics = nullptr;
  // Non-null: GET /metrics serves its exposition (--metrics-on-http).
  const metrics::MetricsEndpoint* metrics_page = nullptr;
};

class OpenAiServer {
 public:
  // Listens and starts serving. INVALID_ARGUMENT / FAILED_PRECONDITION: the
  // security options are wrong for `listen` (as MakeServerCredentials says
  // for gRPC; exit 2); UNAVAILABLE: cannot listen there.
  static absl::StatusOr<std::unique_ptr<OpenAiServer>> Start(const OpenAiServerOptions& options,
                                                             const OpenAiBackend& backend);
  // The checks of Start that need no socket (address, plaintext rule, token
  // file), for refusing a bad command line before the stages are brought up.
  static absl::Status CheckOptions(const OpenAiServerOptions& options);
  ~OpenAiServer();  // Stop()

  int port() const;
  // Stops listening and joins the workers; live streams end when the driver
  // ends their calls (shut the driver down first). Idempotent.
  void Stop();

  struct Impl;

 private:
  explicit OpenAiServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace seam::coordinator::http
