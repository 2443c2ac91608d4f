// `seam plan`: builds the layer stack of a model architecture for every TP
// rank of a topology, checks that every rank bound the same plan and prints
// it. Needs no communicators: plans are data built when the stack binds.
#pragma once

#include <string>

#include "absl/status/statusor.h"

namespace seam::cli {

struct PlanCommandOptions {
  int tp = 1;                    // tensor-parallel ranks of the stage
  int attn_dp = 1;               // attention data-parallel groups (must divide tp)
  int layers = 2;                // decoder layers of the stack (nemotron_h: 0 = the pattern's length)
  std::string policy = "auto";   // ar | rs | rsv | rs+rsv | auto (resolved per architecture)
  std::string arch = "qwen3";    // qwen3 (dense FFN) | qwen3_moe (sparse FFN) | longcat | nemotron_h
  // How the stages read the residual: plain (add + RMSNorm) | gathering (the
  // attention reads and the final read offer gathering reads) | after-gather
  // (FFN reads after the attention-DP gather; attention and final reads need
  // every row, after the attention-TP gather).
  std::string reads = "plain";
  // nemotron_h: hybrid_override_pattern, one stage per character: M (Mamba2)
  // and * (attention) are exit-scoped mixers, - (MLP) a dense FFN.
  std::string pattern;
  bool json = false;             // print JSON instead of text
  int rank = -1;                 // build only this TP rank (-1: every rank)
};

// The plan text (or JSON) to print. INVALID_ARGUMENT (exit 2) names a bad
// value; INTERNAL (exit 1) names the rank whose stack failed to bind or whose
// plan differs from the first rank's.
absl::StatusOr<std::string> RunPlanCommand(const PlanCommandOptions& options);

}  // namespace seam::cli
