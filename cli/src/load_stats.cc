// load_stats.h: per-request samples, then percentiles and goodput.
#include "load_stats.h"

#include <algorithm>
#include <numeric>

#include "latency_stats.h"

namespace seam::cli {
namespace {

struct RequestTimes {
  bool seen = false;  // a token (or text chunk) came before the end
  double ttft = 0, tpot = 0, e2e = 0;
  bool has_tpot = false;
};

RequestTimes TimesOf(const RequestRecord& r) {
  RequestTimes t;
  const LoadAnswer& a = r.answer;
  t.e2e = a.end_seconds - r.submit_seconds;
  if (a.arrivals.empty()) return t;
  t.seen = true;
  t.ttft = a.arrivals.front().seconds - r.submit_seconds;
  // The last token's time: its response (gRPC), or the end of the stream (HTTP).
  const double last = a.per_token ? a.arrivals.back().seconds : a.end_seconds;
  if (a.output_tokens > 1) {
    t.has_tpot = true;
    t.tpot = (last - a.arrivals.front().seconds) / static_cast<double>(a.output_tokens - 1);
  }
  return t;
}

bool Within(const RequestTimes& t, const LatencyTarget& target) {
  if (target.ttft_ms > 0 && (!t.seen || 1e3 * t.ttft > target.ttft_ms)) return false;
  if (target.tpot_ms > 0 && t.has_tpot && 1e3 * t.tpot > target.tpot_ms) return false;
  return !(target.tpot_ms > 0 && !t.seen);
}

std::vector<double> Millis(std::vector<double> seconds) {
  for (double& s : seconds) s *= 1e3;
  return seconds;
}

}  // namespace

Percentiles PercentilesOf(const std::vector<double>& samples) {
  Percentiles p;
  p.samples = static_cast<int64_t>(samples.size());
  if (samples.empty()) return p;
  p.p50 = Percentile(samples, 50);
  p.p90 = Percentile(samples, 90);
  p.p99 = Percentile(samples, 99);
  p.mean = std::accumulate(samples.begin(), samples.end(), 0.0) / static_cast<double>(samples.size());
  return p;
}

LoadFigures SummarizeLoad(const std::vector<RequestRecord>& records, const LatencyTarget& target) {
  LoadFigures f;
  f.target = target;
  f.requests = static_cast<int64_t>(records.size());
  double first = records.empty() ? 0 : 1e300, last = 0;
  std::vector<double> ttft, tpot, e2e;
  LatencySamples tokens;
  bool any_seen = false, all_per_token = true;
  int64_t good = 0, good_tokens = 0;
  for (const RequestRecord& r : records) {
    f.prompt_tokens += r.prompt_tokens;
    f.output_tokens += r.answer.output_tokens;
    first = std::min(first, r.submit_seconds);
    last = std::max(last, r.answer.end_seconds);
    all_per_token = all_per_token && r.answer.per_token;
    const RequestTimes t = TimesOf(r);
    e2e.push_back(t.e2e);
    if (t.seen) {
      any_seen = true;
      ttft.push_back(t.ttft);
      AddSequence(SequenceTiming{r.submit_seconds, r.answer.arrivals}, &tokens);
    }
    if (t.has_tpot) tpot.push_back(t.tpot);
    if (Within(t, target)) ++good, good_tokens += r.answer.output_tokens;
  }
  f.duration_s = std::max(0.0, last - first);
  const double per_s = f.duration_s > 0 ? 1.0 / f.duration_s : 0.0;
  f.request_per_s = f.requests * per_s;
  f.output_tok_per_s = static_cast<double>(f.output_tokens) * per_s;
  f.e2e_ms = PercentilesOf(Millis(e2e));
  f.timing = !any_seen && !records.empty() ? "none" : all_per_token ? "token" : "chunk";
  if (f.timing != "none") {
    f.ttft_ms = PercentilesOf(Millis(ttft));
    f.itl_ms = PercentilesOf(Millis(tokens.inter_token));
    f.tpot_ms = PercentilesOf(Millis(tpot));
  }
  if (f.timing != "none" || (target.ttft_ms <= 0 && target.tpot_ms <= 0)) {
    f.good_requests = good;
    f.goodput_request_per_s = static_cast<double>(good) * per_s;
    f.goodput_tok_per_s = static_cast<double>(good_tokens) * per_s;
  }
  return f;
}

}  // namespace seam::cli
