// `seam check`: runs a checkpoint on a TP group (CPU ranks over real Gloo),
// optionally as pp pipeline pieces, and on one rank, and compares the logits
// of a prefill and of a few decode steps, and the greedy tokens. Prints the
// errors, whether the logits are bitwise identical, and OK or MISMATCH.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

#include "absl/status/status.h"

namespace seam::cli {

struct CheckCommandOptions {
  std::string model_dir;         // Hugging Face model directory
  int tp = 2;                    // TP ranks of the checked group
  int attn_dp = 1;               // attention-DP groups (must divide tp)
  int pp = 1;                    // pipeline pieces (even layer ranges); at tp 1 logits must be bitwise equal
  std::string policy = "auto";   // ar | rs | rsv | rs+rsv | auto
  int prompts = 3;               // prompts in the batch (lengths differ)
  int max_len = 12;              // longest prompt
  int decode_steps = 4;          // greedy decode steps after the prefill
  uint64_t seed = 1;             // prompt tokens
  double tolerance = 1e-4;       // max |a - b| / max |b| per logits tensor
  std::string device = "cpu";    // cpu | cuda: the group's TP rank r (of piece k) on GPU k·tp + r, the reference on GPU 0
  std::string dtype = "f32";     // f32 | bf16 (compute and weights, both sides)
  std::string allreduce_fusion = "auto";  // off | auto | always: the checked group's IPC fusion (CUDA bf16 TP > 1)
  // The checked group's batch variants: auto (per batch), sequence-parallel,
  // context-parallel (every prefill), or ordinary | unpadded |
  // input-scattered for every batch.
  std::string variant = "auto";
  // Context-parallel ranks of the checked group (attention TP = tp / cp, no
  // attention DP). With variant auto, every prefill runs context-parallel.
  int cp = 1;
};

// Prints the report on `out`. INVALID_ARGUMENT (exit 2): a bad flag, or a
// model that does not fit the flags; INTERNAL (exit 1): MISMATCH; any other
// error (exit 1): a run failed.
absl::Status RunCheckCommand(const CheckCommandOptions& options, std::ostream& out);

}  // namespace seam::cli
