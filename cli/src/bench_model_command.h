// `seam bench model`: prefill and decode throughput of one stage group on
// CPU ranks (real Gloo) at TP 1 and TP 2 in the same run, reported as tokens/s
// and as the TP 2 / TP 1 ratio, with the machine's core count.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

#include "absl/status/status.h"

namespace seam::cli {

struct BenchModelOptions {
  std::string model_dir;    // empty: write a random qwen3 checkpoint of the sizes below
  int64_t hidden = 512;
  int64_t layers = 4;
  int64_t vocab = 4096;
  int batch = 8;            // sequences
  int prompt_len = 128;     // prefill tokens per sequence
  int decode_steps = 16;    // decode steps after the prefill
  int repeats = 3;          // best of N
  std::string json_out;     // also write the results as JSON here
};

// Prints the measurements on `out`. INVALID_ARGUMENT (exit 2): a bad flag or
// an unreadable --model; any other error (exit 1): a run failed.
absl::Status RunBenchModelCommand(const BenchModelOptions& options, std::ostream& out);

}  // namespace seam::cli
