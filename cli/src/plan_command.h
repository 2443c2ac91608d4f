// `seam plan`: builds the layer stack of a model architecture for every TP
// rank of a topology, checks that every rank bound the same plan and prints
// it. Needs no communicators: plans are data built when the stack binds.
#pragma once

#include <ostream>
#include <string>

namespace seam::cli {

struct PlanCommandOptions {
  int tp = 1;                    // tensor-parallel ranks of the stage
  int attn_dp = 1;               // attention data-parallel groups (must divide tp)
  int layers = 2;                // decoder layers of the stack
  std::string policy = "auto";   // ar | rs | rsv | rs+rsv | auto (resolved per architecture)
  std::string arch = "qwen3";    // qwen3 (dense FFN) | qwen3_moe (sparse FFN)
  bool json = false;             // print JSON instead of text
  int rank = -1;                 // build only this TP rank (-1: every rank)
};

// Exit codes: 0 printed; 1 the ranks' plans differ or a stack failed to bind
// (message on `err` naming the rank); 2 bad arguments (message naming the value).
int RunPlanCommand(const PlanCommandOptions& options, std::ostream& out, std::ostream& err);

}  // namespace seam::cli
