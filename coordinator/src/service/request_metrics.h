// What the coordinator tells about each client call: the vLLM-shaped request
// metrics (seam:time_to_first_token_seconds, ...) and its log lines, every
// one of them carrying the server's request id (request_id) and the client's
// (client_request_id): "request received" and "first token" at debug level,
// one line at its end at info (warn when it failed). MeteredCall sits
// between the driver and a call's reactor: it sees every token first, then
// passes everything on unchanged.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/histogram.h>

#include "pipeline_driver.h"
#include "seam/core/logging.h"
#include "seam/metrics/metrics_endpoint.h"

namespace seam::coordinator {

// What every series says about the model and its cache (vLLM's
// model_name label and cache_config_info).
struct MetricsModelInfo {
  std::string model_name;
  int64_t block_size = 0;              // tokens per KV block
  int64_t kv_blocks_per_dp_group = 0;  // what the coordinator admits against
  int64_t dp_groups = 1;
  int64_t max_model_len = 0;           // PipelineLimits::max_context
};

// The coordinator's instruments, registered on `endpoint`'s registry, each
// series labelled model_name; the scheduler's gauges (running, waiting, KV
// usage, preemptions) are read from `driver` at each scrape, and the
// microbatches' token rows observed as the driver sends them. Thread-safe.
class CoordinatorMetrics {
 public:
  CoordinatorMetrics(metrics::MetricsEndpoint& endpoint, PipelineDriver* driver, const MetricsModelInfo& info);

  prometheus::Histogram& ttft;
  prometheus::Histogram& inter_token;
  prometheus::Histogram& e2e;
  // vLLM's request phases, per sequence: arrival to its first prefill
  // chunk sent (queue), then to its first token (prefill), then to its end
  // (decode); first chunk to end (inference).
  prometheus::Histogram& queue_time;
  prometheus::Histogram& prefill_time;
  prometheus::Histogram& decode_time;
  prometheus::Histogram& inference_time;
  prometheus::Histogram& prompt_length;      // prompt tokens of each finished sequence
  prometheus::Histogram& generation_length;  // tokens each finished sequence generated
  prometheus::Histogram& iteration_tokens;   // token rows of each microbatch sent
  prometheus::Counter& prompt_tokens;
  prometheus::Counter& generation_tokens;
  prometheus::Family<prometheus::Counter>& success;  // by finished_reason: length, stop
  prometheus::Family<prometheus::Counter>& failure;  // by code: UNAVAILABLE, INVALID_ARGUMENT, ...
  const std::string model_name;
};

// A request id made by the server: "req-" and 16 hex digits, unique per
// process run (random start, then counting).
std::string NewServerRequestId();

// How a call names itself in log lines: {request_id, client_request_id}.
// The client's id is cut to `max_client_bytes` (what validation allows).
LogFields RequestLogFields(const std::string& request_id, const std::string& client_request_id,
                           size_t max_client_bytes);

// Wraps `inner` for one call. Deletes itself after passing OnDone on (the
// driver forgets an observer after OnDone). `metrics` may be null (no
// --metrics-listen): only the log line is written.
class MeteredCall final : public CallObserver {
 public:
  // `identity` from RequestLogFields; `api` says where the call came in
  // ("grpc", "http").
  MeteredCall(CallObserver* inner, CoordinatorMetrics* metrics, LogFields identity, std::string api,
              std::vector<int> prompt_tokens, bool score);

  void OnToken(int sequence_index, const TokenOutput& token) override;
  void OnSequenceFinished(int sequence_index, FinishReason reason, const std::string& text) override;
  void OnScore(int sequence_index, std::vector<float> token_logprobs) override;
  void OnScheduled(int sequence_index) override;
  void OnDone(const absl::Status& status) override;
  bool Cancelled() const override { return inner_->Cancelled(); }

 private:
  using Clock = std::chrono::steady_clock;
  struct Sequence {
    int prompt_tokens = 0;
    int generated = 0;
    Clock::time_point scheduled{};    // its first prefill chunk sent
    Clock::time_point first_token{};
    Clock::time_point last_token{};
    std::string finish_reason;  // "" until finished
  };
  CallObserver* inner_;
  CoordinatorMetrics* metrics_;
  LogFields identity_;
  std::string api_;
  bool score_;
  Clock::time_point start_;
  Clock::time_point first_token_{};
  std::vector<Sequence> sequences_;
};

}  // namespace seam::coordinator
