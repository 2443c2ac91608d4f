// The seam-coordinator process: brings up the stages, starts the driver and
// serves the client API until SIGINT/SIGTERM, then shuts down in order
// (driver first, so every call is answered, then the gRPC server).
#pragma once

#include <chrono>
#include <ostream>
#include <string>
#include <vector>

#include "seam/security/credentials.h"
#include "service/grpc_stage_link.h"
#include "service/pipeline_limits.h"

namespace seam::coordinator {

struct CoordinatorServerOptions {
  std::string listen = "127.0.0.1:0";     // client API address
  std::string port_file;                  // where the bound port is written once serving
  // The client API: TLS, the bearer token, plaintext only on loopback or
  // with `insecure` (grpc.health.v1 is open without the token).
  security::ServerSecurityOptions server_security;
  std::string health_listen;              // non-empty: a plaintext grpc.health.v1-only port for probes
  // Non-empty: the OpenAI-compatible HTTP API there too, with server_security's
  // TLS and token (http/openai_server.h); its port is written to
  // http_port_file (before port_file) once serving.
  std::string http_listen;
  std::string http_port_file;
  std::string served_model_name;          // the model's name over HTTP; empty: the --model folder's name
  // Non-empty: Prometheus /metrics on this host:port: HTTPS with the
  // client API's certificate, else plain HTTP on loopback only unless
  // server_security.insecure.
  std::string metrics_listen;
  // The same /metrics also on the HTTP API (http_listen), behind its token.
  bool metrics_on_http = false;
  // The coordinator as the stages' client: their CA and its client certificate.
  security::ClientSecurityOptions stage_security;
  std::vector<std::string> stages;        // host:port of each stage, rank order
  std::string model_dir;
  int tp = 1;
  int attn_dp = 1;
  std::string layers;                     // "0-13,14-27"; empty: even split
  // Caps on what the stages report (pipeline_limits.h): KV blocks per
  // attention-DP group to admit against, token rows of one microbatch
  // (SchedulerOptions::max_tokens_per_microbatch) and the longest prompt;
  // 0: the stages' own figure. A cap above theirs is lowered to it, with a warning.
  LimitCaps caps;
  int max_queue = 1024;                   // sequences waiting for admission
  // Decode steps a microbatch may run on the stages without a round trip
  // to the coordinator (SchedulerOptions::max_decode_steps); 1: off.
  int decode_steps = 8;
  // Where runs of several steps start after an admission
  // (SchedulerOptions::first_decode_steps); 0: at decode_steps (no ramp),
  // 1: the ramp 1, 2, 4, ... that lets a burst's later arrivals join early.
  int decode_ramp_start = 0;
  // Microbatches the stages hold at once (SchedulerOptions::
  // max_inflight_microbatches); 0: one per pipeline stage.
  int max_inflight_microbatches = 0;
  // PipelineDriverOptions::delivery_threads (< 0: one per four cores, 1-4;
  // 0: the driver thread).
  int delivery_threads = -1;
  // Multi-step runs may take sequences past their last token
  // (SchedulerOptions::max_context set from the pipeline's limits; off: 0).
  bool decode_run_past = false;
  // SchedulerOptions::overlap_steps: "on", "off", or "auto" (on with one
  // pipeline stage, the only layout it applies to).
  std::string overlap_steps = "auto";
  // Chunked prefill (SchedulerOptions::chunked_prefill; the same switch as
  // caps.chunked_prefill): prompts are prefilled in chunks of at most
  // prefill_chunk_tokens, in microbatches beside the running decode rows.
  int prefill_chunk_tokens = 512;
  // SchedulerOptions::max_mixed_prefill_tokens (0: none).
  int max_mixed_prefill_tokens = 0;
  // SchedulerOptions::itl_target_ms (0: none).
  double itl_target_ms = 0;
  // Prefix caching (SchedulerOptions::prefix_caching), where the model
  // allows it: never for stages that keep recurrent state per sequence
  // (they report state slots, e.g. NemotronHForCausalLM).
  bool prefix_caching = true;
  // A microbatch's deadline on the stages: stage_timeout plus
  // stage_timeout_per_token per token owed (PipelineDriverOptions).
  std::chrono::milliseconds stage_timeout{10000};
  std::chrono::milliseconds stage_timeout_per_token{100};
  // How a dead or stopped stage is found while it owes results.
  StageLivenessOptions liveness;
  std::chrono::milliseconds startup_timeout{120000};  // stages' gRPC, Configure and READY
};

// "10s", "500ms", "2m" or a number of seconds. False when unparsable.
bool ParseDuration(const std::string& text, std::chrono::milliseconds* out);

// Exit codes: 0 after a clean shutdown; 1 when bring-up failed; 2 bad
// arguments (a missing or unreadable credential file, plaintext on a
// non-loopback --listen without --insecure).
int RunCoordinatorServer(const CoordinatorServerOptions& options, std::ostream& err);

}  // namespace seam::coordinator
