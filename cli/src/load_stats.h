// The figures of one load point from its requests as the client saw them:
// throughput, latency percentiles (nearest rank, latency_stats.h) and
// goodput under a latency target. Pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "load_runner.h"

namespace seam::cli {

struct Percentiles {
  double p50 = 0, p90 = 0, p99 = 0, mean = 0;
  int64_t samples = 0;
};
Percentiles PercentilesOf(const std::vector<double>& samples);

// A request is good when its TTFT and its TPOT are within these (a target
// of 0 is no target).
struct LatencyTarget {
  double ttft_ms = 0;
  double tpot_ms = 0;
};

struct LoadFigures {
  int64_t requests = 0, prompt_tokens = 0, output_tokens = 0;
  double duration_s = 0;  // first submit to the last answer's end
  double request_per_s = 0, output_tok_per_s = 0;
  // How token times were seen: "token" (every streamed token stamped, gRPC),
  // "chunk" (HTTP: each text chunk stamped; one chunk may hold several
  // tokens, so ITL is per chunk) or "none" (no text came before the end: the
  // model has no tokenizer.json, so the HTTP stream is one chunk and TTFT,
  // ITL and TPOT cannot be seen).
  std::string timing = "token";
  std::optional<Percentiles> ttft_ms, itl_ms, tpot_ms;  // absent with timing "none"
  Percentiles e2e_ms;
  LatencyTarget target;
  // Requests within the target and their rates over duration_s; absent when
  // a target is set that timing "none" cannot check.
  std::optional<int64_t> good_requests;
  double goodput_request_per_s = 0, goodput_tok_per_s = 0;
};

LoadFigures SummarizeLoad(const std::vector<RequestRecord>& records, const LatencyTarget& target);

}  // namespace seam::cli
