// `seam logits`: the logits a checkpoint gives for given prompts, written to
// a file for a comparison with another implementation
// (tools/compare_longcat_transformers.py). One rank (a runtime::StageGroup of
// TP 1, on the host or on GPU 0), every step eager, each prompt on its own:
// its prefill (every position's logits), then greedy decode steps, or steps
// fed the tokens of --forced so that both sides decode the same sequence.
//
// Input (--prompts): a JSON array of prompts, each an array of token ids.
// --forced: a JSON array of the same length, entry p the tokens decode step
// k >= 1 of prompt p is fed (at least new_tokens - 1 of them).
// Output: PREFIX.bin, float32, little-endian, per prompt in order its
// prefill rows [len, vocab] then new_tokens rows [new_tokens, vocab] (row 0
// the prefill's last row, row k the logits of decode step k); PREFIX.json:
// {"vocab", "device", "dtype", "forced", "prompts": [{"prefill_rows",
// "tokens": the argmax of each of the new_tokens rows}]} (the layout
// `seam-bench-gpu logits` writes).
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

#include "absl/status/status.h"

namespace seam::cli {

struct LogitsCommandOptions {
  std::string model_dir;       // Hugging Face model directory
  std::string device = "cpu";  // cpu | cuda (GPU 0)
  std::string dtype = "f32";   // f32 | bf16: weights and compute
  std::string prompts;         // JSON file: [[ids...], ...]
  std::string forced;          // optional JSON file: [[ids...], ...], the tokens decode steps are fed
  int new_tokens = 4;          // rows after the prefill: its last row, then new_tokens - 1 decode steps
  std::string out;             // output prefix: PREFIX.bin and PREFIX.json
};

// Prints one line per prompt on `out`. INVALID_ARGUMENT (exit 2): a bad flag
// or input file; other errors (exit 1): the model failed to load or run.
absl::Status RunLogitsCommand(const LogitsCommandOptions& options, std::ostream& out);

}  // namespace seam::cli
