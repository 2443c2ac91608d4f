// Latency samples of a served benchmark: what one streamed sequence's
// response times say (time to first token, inter-token latency, end to end),
// and percentiles by nearest rank. Pure functions; the caller owns the samples.
#pragma once

#include <cstddef>
#include <vector>

namespace seam::cli {

// The p-th percentile (p in [0, 100]) of `samples` by nearest rank: the
// sample at rank ceil(p / 100 * n) of the sorted samples (rank 1 for p = 0),
// so every figure is one that was measured. 0 when there are no samples.
double Percentile(std::vector<double> samples, double p);

// One streamed response of a sequence: when it arrived (seconds on the
// caller's clock) and how many tokens it carried.
struct TokenArrival {
  double seconds = 0;
  int tokens = 0;
};

// One sequence of a streaming call: when it was submitted and its responses
// in arrival order (responses without tokens are left out by the caller).
struct SequenceTiming {
  double submit_seconds = 0;
  std::vector<TokenArrival> arrivals;
};

// The latency samples of many sequences, in seconds.
struct LatencySamples {
  std::vector<double> ttft;  // submit to the first token, one per sequence
  // Gaps between a sequence's successive tokens: a response of k tokens that
  // came g after the previous one adds k samples of g / k. Tokens that came
  // with the first token add none.
  std::vector<double> inter_token;
  std::vector<double> end_to_end;  // submit to the last token, one per sequence
  // Per sequence, first to last token over the tokens after the first
  // response: its mean decode step as the client saw it. Unlike the gaps it
  // holds when responses reach the client in bursts (several messages in one
  // read, a few microseconds apart). One per sequence of two responses or more.
  std::vector<double> decode_step;
};

// Adds one sequence's samples; a sequence with no token adds none.
void AddSequence(const SequenceTiming& sequence, LatencySamples* samples);

}  // namespace seam::cli
