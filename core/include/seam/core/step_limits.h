// The defaults of the figures that bound one step of a served pipeline, in
// one place. A stage sizes itself from them (or from its flags), reports
// what it ended up with in StageStatus.limits, and the coordinator derives
// its batching and request limits from the least over the stages (its own
// flags may only lower them): nothing else sets these figures.
#pragma once

#include <cstdint>

namespace seam {

// Token rows of one step, summed over the attention-DP groups: what a stage
// reserves activation memory for (seam-stage --max-step-tokens), and so the
// most a coordinator's microbatch carries.
inline constexpr int64_t kDefaultMaxStepTokens = 8192;

// The share of a GPU's memory a stage may fill (weights, activations, KV
// cache; seam-stage --kv-memory-fraction, as vLLM's gpu_memory_utilization).
inline constexpr double kDefaultKvMemoryFraction = 0.9;

// Bytes of KV cache per rank on the host (seam-stage --kv-cache-bytes).
inline constexpr int64_t kDefaultHostKvCacheBytes = int64_t{1} << 30;

// Tokens per KV block.
inline constexpr int64_t kDefaultKvBlockSize = 16;

// A rank with Mamba layers carves its sequences' recurrent state out of its
// KV budget: this share of the budget, as many sequences as it holds but at
// most kDefaultMaxStateSequences, unless a count is given (seam-stage
// --state-sequences). Each sequence of a DP group takes one slot.
inline constexpr double kDefaultStateShare = 0.25;
inline constexpr int64_t kDefaultMaxStateSequences = 256;

// The longest context a decode graph serves (its block tables' width).
inline constexpr int64_t kDefaultGraphMaxContext = 8192;

}  // namespace seam
