// Request metrics and the log lines of a call (see request_metrics.h).
#include "service/request_metrics.h"

#include <atomic>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "seam/core/logging.h"
#include "seam/metrics/snapshot_collector.h"
#include "service/prefix_cache_metrics.h"

namespace seam::coordinator {
namespace {

double Seconds(std::chrono::steady_clock::duration d) { return std::chrono::duration<double>(d).count(); }

// vLLM's finished_reason values for the same ends.
const char* FinishedReason(FinishReason reason) {
  switch (reason) {
    case FinishReason::kMaxTokens: return "length";
    case FinishReason::kStopToken:
    case FinishReason::kStopString: return "stop";
    case FinishReason::kCancelled: return "abort";
  }
  return "abort";
}

}  // namespace

CoordinatorMetrics::CoordinatorMetrics(metrics::MetricsEndpoint& endpoint, const PipelineDriver* driver)
    : ttft(prometheus::BuildHistogram()
               .Name("seam:time_to_first_token_seconds")
               .Help("Time from a request's arrival to its first generated token, per sequence")
               .Register(endpoint.registry())
               .Add({}, metrics::TimeToFirstTokenBuckets())),
      inter_token(prometheus::BuildHistogram()
                      .Name("seam:inter_token_latency_seconds")
                      .Help("Time between two consecutive tokens of one sequence")
                      .Register(endpoint.registry())
                      .Add({}, metrics::InterTokenLatencyBuckets())),
      e2e(prometheus::BuildHistogram()
              .Name("seam:e2e_request_latency_seconds")
              .Help("Time from a request's arrival to the end of a sequence")
              .Register(endpoint.registry())
              .Add({}, metrics::RequestLatencyBuckets())),
      prompt_tokens(prometheus::BuildCounter()
                        .Name("seam:prompt_tokens_total")
                        .Help("Prompt tokens prefilled (counted when a sequence's first token arrives)")
                        .Register(endpoint.registry())
                        .Add({})),
      generation_tokens(prometheus::BuildCounter()
                            .Name("seam:generation_tokens_total")
                            .Help("Tokens generated")
                            .Register(endpoint.registry())
                            .Add({})),
      success(prometheus::BuildCounter()
                  .Name("seam:request_success_total")
                  .Help("Sequences that finished, by finished_reason (length: max_new_tokens, stop: a stop token)")
                  .Register(endpoint.registry())),
      failure(prometheus::BuildCounter()
                  .Name("seam:request_failure_total")
                  .Help("Calls that ended with an error, by gRPC status code")
                  .Register(endpoint.registry())) {
  endpoint.AddCollectable(std::make_shared<metrics::SnapshotCollector>([driver] {
    const PipelineDriver::Load load = driver->CurrentLoad();
    using prometheus::MetricType;
    std::vector<prometheus::MetricFamily> families{
        metrics::ValueFamily("seam:num_requests_running", "Sequences admitted and not ended", MetricType::Gauge,
                             {{{}, static_cast<double>(load.running)}}),
        metrics::ValueFamily("seam:num_requests_waiting", "Sequences queued for admission", MetricType::Gauge,
                             {{{}, static_cast<double>(load.waiting)}}),
        metrics::ValueFamily("seam:kv_cache_usage_perc",
                             "Share of the KV blocks the coordinator admits against that are held (0 to 1)",
                             MetricType::Gauge, {{{}, load.kv_usage}}),
    };
    for (prometheus::MetricFamily& f : PrefixCacheFamilies(load.prefix)) families.push_back(std::move(f));
    return families;
  }));
}

std::string NewServerRequestId() {
  static std::atomic<uint64_t> next{std::random_device{}() * 0x9E3779B97F4A7C15ull};
  return absl::StrFormat("req-%016x", next.fetch_add(1));
}

LogFields RequestLogFields(const std::string& request_id, const std::string& client_request_id,
                           size_t max_client_bytes) {
  return {{"request_id", request_id}, {"client_request_id", client_request_id.substr(0, max_client_bytes)}};
}

MeteredCall::MeteredCall(CallObserver* inner, CoordinatorMetrics* metrics, LogFields identity, std::string api,
                         std::vector<int> prompt_tokens, bool score)
    : inner_(inner),
      metrics_(metrics),
      identity_(std::move(identity)),
      api_(std::move(api)),
      score_(score),
      start_(Clock::now()) {
  int prompt = 0;
  for (int p : prompt_tokens) {
    sequences_.push_back(Sequence{p});
    prompt += p;
  }
  LogFields fields = identity_;
  fields.insert(fields.end(), {{"api", api_},
                               {"kind", score_ ? "score" : "generate"},
                               {"sequences", absl::StrCat(sequences_.size())},
                               {"prompt_tokens", absl::StrCat(prompt)}});
  ScopedLogFields scope(std::move(fields));
  SEAM_LOG_DEBUG("request received");
}

void MeteredCall::OnToken(int sequence_index, const TokenOutput& token) {
  const Clock::time_point now = Clock::now();
  Sequence& s = sequences_[sequence_index];
  if (first_token_ == Clock::time_point{}) {
    first_token_ = now;
    LogFields fields = identity_;
    fields.emplace_back("ttft_s", absl::StrFormat("%.6f", Seconds(now - start_)));
    ScopedLogFields scope(std::move(fields));
    SEAM_LOG_DEBUG("first token");
  }
  if (metrics_ != nullptr && !score_) {
    if (s.generated == 0) {
      metrics_->ttft.Observe(Seconds(now - start_));
      metrics_->prompt_tokens.Increment(s.prompt_tokens);
    } else {
      metrics_->inter_token.Observe(Seconds(now - s.last_token));
    }
    metrics_->generation_tokens.Increment();
  }
  s.generated += 1;
  s.last_token = now;
  inner_->OnToken(sequence_index, token);
}

void MeteredCall::OnSequenceFinished(int sequence_index, FinishReason reason, const std::string& text) {
  Sequence& s = sequences_[sequence_index];
  s.finish_reason = FinishedReason(reason);
  if (metrics_ != nullptr && !score_) {
    metrics_->e2e.Observe(Seconds(Clock::now() - start_));
    metrics_->success.Add({{"finished_reason", s.finish_reason}}).Increment();
  }
  inner_->OnSequenceFinished(sequence_index, reason, text);
}

void MeteredCall::OnScore(int sequence_index, std::vector<float> token_logprobs) {
  inner_->OnScore(sequence_index, std::move(token_logprobs));
}

void MeteredCall::OnDone(const absl::Status& status) {
  const Clock::time_point now = Clock::now();
  if (metrics_ != nullptr && !status.ok()) {
    metrics_->failure.Add({{"code", absl::StatusCodeToString(status.code())}}).Increment();
  }
  int prompt = 0, generated = 0;
  std::vector<std::string> reasons;
  for (const Sequence& s : sequences_) {
    prompt += s.prompt_tokens;
    generated += s.generated;
    reasons.push_back(s.finish_reason.empty() ? "none" : s.finish_reason);
  }
  {
    LogFields fields = identity_;
    fields.insert(fields.end(), {{"api", api_},
                        {"kind", score_ ? "score" : "generate"},
                        {"status", absl::StatusCodeToString(status.code())},
                        {"sequences", absl::StrCat(sequences_.size())},
                        {"prompt_tokens", absl::StrCat(prompt)},
                        {"generated_tokens", absl::StrCat(generated)},
                        {"ttft_s", first_token_ == Clock::time_point{}
                                       ? std::string("none")
                                       : absl::StrFormat("%.6f", Seconds(first_token_ - start_))},
                        {"total_s", absl::StrFormat("%.6f", Seconds(now - start_))},
                        {"finish_reason", absl::StrJoin(reasons, ",")}});
    if (!status.ok()) fields.emplace_back("error", std::string(status.message()));
    ScopedLogFields scope(std::move(fields));
    if (status.ok()) {
      SEAM_LOG_INFO("request finished");
    } else {
      SEAM_LOG_WARN("request failed");
    }
  }
  inner_->OnDone(status);
  delete this;
}

}  // namespace seam::coordinator
