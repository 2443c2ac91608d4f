// Request metrics and the log lines of a call (see request_metrics.h).
#include "service/request_metrics.h"

#include <atomic>
#include <map>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "seam/core/logging.h"
#include "seam/metrics/snapshot_collector.h"
#include "service/prefix_cache_metrics.h"
#include "service/step_budget_metrics.h"

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

namespace {

using Labels = std::map<std::string, std::string>;

prometheus::Histogram& Histogram(metrics::MetricsEndpoint& e, const std::string& name, const std::string& help,
                                 const Labels& model, prometheus::Histogram::BucketBoundaries buckets) {
  return prometheus::BuildHistogram().Name(name).Help(help).Labels(model).Register(e.registry()).Add({}, buckets);
}

prometheus::Family<prometheus::Counter>& Counters(metrics::MetricsEndpoint& e, const std::string& name,
                                                  const std::string& help, const Labels& model) {
  return prometheus::BuildCounter().Name(name).Help(help).Labels(model).Register(e.registry());
}

// vLLM's token-count buckets: 1, 2, 5, 10, 20, 50, ... up to `most`.
prometheus::Histogram::BucketBoundaries LengthBuckets(int64_t most) {
  prometheus::Histogram::BucketBoundaries b;
  for (double scale = 1; b.empty() || b.back() < static_cast<double>(most); scale *= 10) {
    for (double m : {1.0, 2.0, 5.0}) b.push_back(m * scale);
  }
  return b;
}

prometheus::Histogram::BucketBoundaries IterationBuckets() {
  return {1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384};
}

// The scheduler's figures at each scrape, and the cache's configuration.
std::shared_ptr<prometheus::Collectable> LoadCollector(const PipelineDriver* driver, const MetricsModelInfo& info) {
  return std::make_shared<metrics::SnapshotCollector>([driver, info] {
    const PipelineDriver::Load load = driver->CurrentLoad();
    using prometheus::MetricType;
    using Pairs = std::vector<std::pair<std::string, std::string>>;
    const Pairs model = {{"model_name", info.model_name}};
    const Pairs cache = {{"model_name", info.model_name},
                          {"block_size", absl::StrCat(info.block_size)},
                          {"num_gpu_blocks", absl::StrCat(info.kv_blocks_per_dp_group * info.dp_groups)},
                          {"num_blocks_per_dp_group", absl::StrCat(info.kv_blocks_per_dp_group)},
                          {"dp_groups", absl::StrCat(info.dp_groups)},
                          {"max_model_len", absl::StrCat(info.max_model_len)}};
    std::vector<prometheus::MetricFamily> families{
        metrics::ValueFamily("seam:num_requests_running", "Sequences admitted and not ended", MetricType::Gauge,
                             {{model, static_cast<double>(load.running)}}),
        metrics::ValueFamily("seam:num_requests_waiting", "Sequences queued for admission", MetricType::Gauge,
                             {{model, static_cast<double>(load.waiting)}}),
        metrics::ValueFamily("seam:kv_cache_usage_perc",
                             "Share of the KV blocks the coordinator admits against that are held (0 to 1)",
                             MetricType::Gauge, {{model, load.kv_usage}}),
        metrics::ValueFamily("seam:num_preemptions_total", "Sequences preempted (their KV freed, recomputed later)",
                             MetricType::Counter, {{model, static_cast<double>(load.preemptions)}}),
        metrics::ValueFamily("seam:cache_config_info", "The KV cache the coordinator admits against (value 1)",
                             MetricType::Gauge, {{cache, 1.0}}),
    };
    for (prometheus::MetricFamily& f : PrefixCacheFamilies(load.prefix, model)) families.push_back(std::move(f));
    for (prometheus::MetricFamily& f : StepBudgetFamilies(load.step_budget, model)) families.push_back(std::move(f));
    return families;
  });
}

}  // namespace

CoordinatorMetrics::CoordinatorMetrics(metrics::MetricsEndpoint& e, PipelineDriver* driver,
                                       const MetricsModelInfo& info)
    : ttft(Histogram(e, "seam:time_to_first_token_seconds",
                     "Time from a request's arrival to its first generated token, per sequence",
                     {{"model_name", info.model_name}}, metrics::TimeToFirstTokenBuckets())),
      inter_token(Histogram(e, "seam:inter_token_latency_seconds", "Time between two consecutive tokens of one sequence",
                            {{"model_name", info.model_name}}, metrics::InterTokenLatencyBuckets())),
      e2e(Histogram(e, "seam:e2e_request_latency_seconds", "Time from a request's arrival to the end of a sequence",
                    {{"model_name", info.model_name}}, metrics::RequestLatencyBuckets())),
      queue_time(Histogram(e, "seam:request_queue_time_seconds",
                           "Time from a request's arrival to its sequence's first prefill chunk sent to the stages",
                           {{"model_name", info.model_name}}, metrics::RequestLatencyBuckets())),
      prefill_time(Histogram(e, "seam:request_prefill_time_seconds",
                             "Time from a sequence's first prefill chunk sent to its first token",
                             {{"model_name", info.model_name}}, metrics::RequestLatencyBuckets())),
      decode_time(Histogram(e, "seam:request_decode_time_seconds", "Time from a sequence's first token to its end",
                            {{"model_name", info.model_name}}, metrics::RequestLatencyBuckets())),
      inference_time(Histogram(e, "seam:request_inference_time_seconds",
                               "Time from a sequence's first prefill chunk sent to its end",
                               {{"model_name", info.model_name}}, metrics::RequestLatencyBuckets())),
      prompt_length(Histogram(e, "seam:request_prompt_tokens", "Prompt tokens of each finished sequence",
                              {{"model_name", info.model_name}}, LengthBuckets(info.max_model_len))),
      generation_length(Histogram(e, "seam:request_generation_tokens", "Tokens each finished sequence generated",
                                  {{"model_name", info.model_name}}, LengthBuckets(info.max_model_len))),
      iteration_tokens(Histogram(e, "seam:iteration_tokens_total",
                                 "Token rows of each microbatch sent to the stages (over its decode steps)",
                                 {{"model_name", info.model_name}}, IterationBuckets())),
      prompt_tokens(Counters(e, "seam:prompt_tokens_total",
                             "Prompt tokens prefilled (counted when a sequence's first token arrives)",
                             {{"model_name", info.model_name}})
                        .Add({})),
      generation_tokens(
          Counters(e, "seam:generation_tokens_total", "Tokens generated", {{"model_name", info.model_name}}).Add({})),
      success(Counters(e, "seam:request_success_total",
                       "Sequences that finished, by finished_reason (length: max_new_tokens, stop: a stop token)",
                       {{"model_name", info.model_name}})),
      failure(Counters(e, "seam:request_failure_total", "Calls that ended with an error, by gRPC status code",
                       {{"model_name", info.model_name}})),
      model_name(info.model_name) {
  e.AddCollectable(LoadCollector(driver, info));
  prometheus::Histogram* iterations = &iteration_tokens;
  driver->ObserveMicrobatches([iterations](int64_t tokens) { iterations->Observe(static_cast<double>(tokens)); });
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
      s.first_token = now;
      metrics_->ttft.Observe(Seconds(now - start_));
      if (s.scheduled != Clock::time_point{}) metrics_->prefill_time.Observe(Seconds(now - s.scheduled));
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
    const Clock::time_point now = Clock::now();
    metrics_->e2e.Observe(Seconds(now - start_));
    if (s.first_token != Clock::time_point{}) metrics_->decode_time.Observe(Seconds(now - s.first_token));
    if (s.scheduled != Clock::time_point{}) metrics_->inference_time.Observe(Seconds(now - s.scheduled));
    metrics_->prompt_length.Observe(s.prompt_tokens);
    metrics_->generation_length.Observe(s.generated);
    metrics_->success.Add({{"finished_reason", s.finish_reason}}).Increment();
  }
  inner_->OnSequenceFinished(sequence_index, reason, text);
}

void MeteredCall::OnScheduled(int sequence_index) {
  Sequence& s = sequences_[sequence_index];
  if (s.scheduled != Clock::time_point{}) return;
  s.scheduled = Clock::now();
  if (metrics_ != nullptr && !score_) metrics_->queue_time.Observe(Seconds(s.scheduled - start_));
  inner_->OnScheduled(sequence_index);
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
