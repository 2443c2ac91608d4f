// latency_stats.h: nearest-rank percentiles and a sequence's latency samples.
#include "latency_stats.h"

#include <algorithm>
#include <cmath>

namespace seam::cli {

double Percentile(std::vector<double> samples, double p) {
  if (samples.empty()) return 0;
  const size_t n = samples.size();
  const double clamped = std::clamp(p, 0.0, 100.0);
  size_t rank = static_cast<size_t>(std::ceil(clamped / 100.0 * static_cast<double>(n)));
  rank = std::clamp<size_t>(rank, 1, n);
  std::nth_element(samples.begin(), samples.begin() + (rank - 1), samples.end());
  return samples[rank - 1];
}

void AddSequence(const SequenceTiming& s, LatencySamples* out) {
  if (s.arrivals.empty()) return;
  out->ttft.push_back(s.arrivals.front().seconds - s.submit_seconds);
  out->end_to_end.push_back(s.arrivals.back().seconds - s.submit_seconds);
  int later_tokens = 0;
  for (size_t i = 1; i < s.arrivals.size(); ++i) later_tokens += std::max(0, s.arrivals[i].tokens);
  if (later_tokens > 0) {
    out->decode_step.push_back((s.arrivals.back().seconds - s.arrivals.front().seconds) / later_tokens);
  }
  for (size_t i = 1; i < s.arrivals.size(); ++i) {
    const TokenArrival& a = s.arrivals[i];
    if (a.tokens < 1) continue;
    const double gap = (a.seconds - s.arrivals[i - 1].seconds) / a.tokens;
    out->inter_token.insert(out->inter_token.end(), static_cast<size_t>(a.tokens), gap);
  }
}

}  // namespace seam::cli
