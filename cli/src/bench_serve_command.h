// `seam bench serve`: the served path end to end (gRPC in, streamed tokens
// out, through a seam-coordinator and seam-stage processes) for one model and
// one layout, beside two baselines measured in the same run: the same model's
// in-process decode on the same device, and the weight-bytes floor (bytes of
// weights one decode step reads / the memory bandwidth measured here).
#pragma once

#include "absl/status/status.h"

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

namespace seam::cli {

struct BenchServeOptions {
  std::string model_dir;  // empty: write a random qwen3 checkpoint of the sizes below
  int64_t hidden = 512;
  int64_t layers = 4;
  int64_t heads = 8;
  int64_t kv_heads = 4;
  int64_t head_dim = 0;      // 0: hidden / heads
  int64_t intermediate = 0;  // 0: 3 x hidden
  int64_t vocab = 4096;
  int pp = 1;  // seam-stage processes
  int tp = 1;  // ranks per stage
  int attn_dp = 1;
  std::string device = "cpu";  // cpu | cuda: the stages and the in-process baseline
  std::string dtype = "f32";   // f32 | bf16: weights and activations of both
  std::string batch = "1,8,32";  // concurrent sequences, one timed round each
  int prompt_len = 128;
  int new_tokens = 64;  // max_new_tokens of every sequence (greedy, no stop tokens)
  int warmup = 1;       // untimed rounds of the same batch before each timed one
  bool quick = false;   // tiny model and workload (smoke test)
  std::string json_out;                        // also write the figures as JSON here
  std::string logs_dir;                        // keep the pipeline's logs here (default: removed)
  std::vector<std::string> stage_args;         // appended to every seam-stage command line
  std::vector<std::string> coordinator_args;   // appended to the seam-coordinator command line
};

// Exit codes: 0 done; 1 a measurement failed; 2 bad arguments.
absl::Status RunBenchServeCommand(const BenchServeOptions& options, std::ostream& out);

}  // namespace seam::cli
