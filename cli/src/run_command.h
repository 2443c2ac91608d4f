// `seam run`: a local CPU pipeline of seam-stage processes behind a
// seam-coordinator on loopback, a few greedy prompts through it, and the same
// prompts through one in-process stage group; the tokens must match.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace seam::cli {

struct RunCommandOptions {
  std::string model_dir;         // empty: the default small random qwen3 checkpoint in a temp dir
  int pp = 2;                    // seam-stage processes
  int tp = 2;                    // TP ranks per stage
  int attn_dp = 1;               // attention-DP groups per stage
  int max_new_tokens = 8;
  int prompts = 3;               // how many prompts to send
  // "fixed": the fixed short prompts; otherwise a length distribution of
  // load_workload.h ("N", "uniform:A:B", "longtail:MEDIAN:MAX"): that many
  // prompts of token ids drawn from `seed` (a load of long prompts, all in
  // flight at once, checked token for token).
  std::string prompt_len = "fixed";
  uint64_t seed = 1;
  // > 0: every prompt starts with this many shared tokens, and a second
  // round follows (each prompt, its answer and one more token); both
  // rounds are checked against the single-process run.
  int shared_prefix = 0;
  std::string ucx_mode = "tcp";  // tcp | shm
  std::string device = "cpu";    // where the stages and the reference compute: cpu | cuda
  std::string dtype = "f32";     // f32 | bf16: weights, activations and handoffs of the stages and the reference
  std::string allreduce_fusion = "auto";  // off | auto | always (CUDA bf16 TP groups; seam-stage --allreduce-fusion)
  std::string policy = "auto";   // the stages' --reduction-policy: ar | rs | rsv | rs+rsv | auto
  // The stages' --batch-variant: auto | sequence-parallel | ordinary | unpadded | input-scattered
  std::string variant = "auto";
  int64_t scatter_input_rows = 1024;  // the stages' --scatter-input-rows (variant auto)
  int cp = 1;                         // the stages' --cp: context-parallel ranks in each TP group
  int64_t cp_min_rows = 1024;         // the stages' --cp-min-rows (variant auto, cp > 1)
  std::vector<std::string> stage_args;  // appended to every seam-stage command line
  std::vector<std::string> coordinator_args;  // appended to the seam-coordinator command line
  bool insecure = false;         // plaintext and no token (default: TLS, mutual TLS and a token)
};

// Prints the tokens and the batch variants the stages chose (from their
// logs), ending in "tokens match the single-process run" (the reference: one
// in-process group of the same TP, ordinary batches, the default policy).
// INVALID_ARGUMENT (exit 2): a bad flag or an unreadable --model; INTERNAL
// (exit 1): the tokens differ; any other error (exit 1): a failure, the
// children killed.
absl::Status RunRunCommand(const RunCommandOptions& options, std::ostream& out);

}  // namespace seam::cli
