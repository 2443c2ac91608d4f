// `seam bench pipeline`: handoff bandwidth against ucx_perftest on the same
// transport, and local-pipeline throughput at PP 1..3 against the ideal, all
// measured in one run.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

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

// Exit codes: 0 done; 1 a measurement failed; 2 bad arguments.
int RunBenchPipelineCommand(const BenchPipelineOptions& options, std::ostream& out, std::ostream& err);

}  // namespace seam::cli
