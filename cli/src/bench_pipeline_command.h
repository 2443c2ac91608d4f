// `seam bench pipeline`: handoff bandwidth against ucx_perftest on the same
// transport, and local-pipeline throughput at PP 1..3 against the ideal, all
// measured in one run.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

#include "absl/status/status.h"

namespace seam::cli {

struct BenchPipelineOptions {
  bool quick = false;          // fewer iterations, smaller model and workload (smoke test)
  int max_pp = 3;              // pipeline throughput at PP 1..max_pp
  int requests = 16;           // concurrent GenerateAll calls, one prompt each
  int prompt_len = 32;
  int new_tokens = 16;
  int64_t layers = 6;
  int64_t hidden = 256;
  int64_t vocab = 1024;
  std::string ucx_mode = "tcp";  // stage-to-stage transport of the pipelines: tcp or shm
  std::string json_out;          // also write the results as JSON here
};

// Prints the measurements on `out`. INVALID_ARGUMENT (exit 2): a bad flag;
// any other error (exit 1): a measurement failed.
absl::Status RunBenchPipelineCommand(const BenchPipelineOptions& options, std::ostream& out);

}  // namespace seam::cli
