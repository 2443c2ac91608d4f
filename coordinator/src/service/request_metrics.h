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

// The coordinator's instruments, registered on `endpoint`'s registry; the
// scheduler's gauges (running, waiting, KV usage) are read from `driver` at
// each scrape. Thread-safe.
class CoordinatorMetrics {
 public:
  CoordinatorMetrics(metrics::MetricsEndpoint& endpoint, const PipelineDriver* driver);

  prometheus::Histogram& ttft;
  prometheus::Histogram& inter_token;
  prometheus::Histogram& e2e;
  prometheus::Counter& prompt_tokens;
  prometheus::Counter& generation_tokens;
  prometheus::Family<prometheus::Counter>& success;  // by finished_reason: length, stop
  prometheus::Family<prometheus::Counter>& failure;  // by code: UNAVAILABLE, INVALID_ARGUMENT, ...
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
  void OnDone(const absl::Status& status) override;
  bool Cancelled() const override { return inner_->Cancelled(); }

 private:
  using Clock = std::chrono::steady_clock;
  struct Sequence {
    int prompt_tokens = 0;
    int generated = 0;
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
