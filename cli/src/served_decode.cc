// served_decode.h: one thread per sequence, each reading its stream and
// stamping every response with the steady clock.
#include "served_decode.h"

#include <algorithm>
#include <chrono>
#include <future>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "grpc_client.h"
#include "latency_stats.h"

namespace seam::cli {
namespace {

using Clock = std::chrono::steady_clock;

struct SequenceResult {
  SequenceTiming timing;
  int tokens = 0;
  v1::FinishReason finish = v1::FINISH_REASON_UNSPECIFIED;
  grpc::Status status;
};

v1::GenerateRequest MakeRequest(const ServedWorkload& w, int s) {
  v1::GenerateRequest request;
  request.set_request_id(absl::StrCat("bench-serve-b", w.batch, "-r", w.round, "-", s));
  auto* prompt = request.add_prompts()->mutable_token_ids();
  for (int t = 0; t < w.prompt_len; ++t) prompt->Add(BenchPromptToken(s, t, w.round, w.vocab));
  request.mutable_sampling()->set_temperature(0);
  request.mutable_sampling()->set_max_new_tokens(static_cast<uint32_t>(w.new_tokens));
  return request;
}

void RunSequence(v1::Coordinator::Stub& stub, const ServedWorkload& w, int s, Clock::time_point t0,
                 std::shared_future<void> go, SequenceResult* out) {
  const v1::GenerateRequest request = MakeRequest(w, s);
  auto context = ContextWithTimeout(w.timeout_s);
  const auto since = [t0] { return std::chrono::duration<double>(Clock::now() - t0).count(); };
  go.wait();
  out->timing.submit_seconds = since();
  auto reader = stub.Generate(context.get(), request);
  v1::GenerateResponse r;
  while (reader->Read(&r)) {
    const double now = since();
    if (r.token_ids_size() > 0) {
      out->timing.arrivals.push_back(TokenArrival{now, r.token_ids_size()});
      out->tokens += r.token_ids_size();
    }
    if (r.finish_reason() != v1::FINISH_REASON_UNSPECIFIED) out->finish = r.finish_reason();
  }
  out->status = reader->Finish();
}

}  // namespace

int32_t BenchPromptToken(int sequence, int position, uint64_t round, int64_t vocab) {
  const int64_t span = vocab > 2 ? vocab - 2 : 1;
  return static_cast<int32_t>(2 + (sequence * 131 + position * 7 + static_cast<int64_t>(round) * 17) % span);
}

absl::StatusOr<ServedFigures> RunServedWorkload(v1::Coordinator::Stub& stub, const ServedWorkload& w) {
  std::vector<SequenceResult> results(w.batch);
  std::promise<void> release;
  std::shared_future<void> go = release.get_future().share();
  const Clock::time_point t0 = Clock::now();
  std::vector<std::thread> threads;
  threads.reserve(w.batch);
  for (int s = 0; s < w.batch; ++s) {
    threads.emplace_back(RunSequence, std::ref(stub), std::cref(w), s, t0, go, &results[s]);
  }
  release.set_value();
  for (std::thread& t : threads) t.join();

  ServedFigures f;
  LatencySamples samples;
  double first_submit = 1e300, last_token = 0;
  for (int s = 0; s < w.batch; ++s) {
    const SequenceResult& r = results[s];
    if (!r.status.ok()) {
      return absl::InternalError(absl::StrCat("sequence ", s, " of ", w.batch, ": Generate failed: ",
                                              DescribeStatus(r.status)));
    }
    if (r.tokens < w.new_tokens) {
      return absl::FailedPreconditionError(absl::StrCat("sequence ", s, " of ", w.batch, " made ", r.tokens,
                                                        " tokens of ", w.new_tokens, " (finish reason ",
                                                        v1::FinishReason_Name(r.finish), ")"));
    }
    f.tokens += r.tokens;
    first_submit = std::min(first_submit, r.timing.submit_seconds);
    last_token = std::max(last_token, r.timing.arrivals.back().seconds);
    AddSequence(r.timing, &samples);
  }
  f.wall_seconds = last_token - first_submit;
  f.tokens_per_s = f.wall_seconds > 0 ? f.tokens / f.wall_seconds : 0;
  f.ms_per_step = 1e3 * Percentile(samples.decode_step, 50);
  f.ttft_p50_ms = 1e3 * Percentile(samples.ttft, 50);
  f.ttft_p99_ms = 1e3 * Percentile(samples.ttft, 99);
  f.itl_p50_ms = 1e3 * Percentile(samples.inter_token, 50);
  f.itl_p99_ms = 1e3 * Percentile(samples.inter_token, 99);
  f.e2e_p50_ms = 1e3 * Percentile(samples.end_to_end, 50);
  return f;
}

}  // namespace seam::cli
