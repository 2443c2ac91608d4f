// Token choice where the logits are: one token per sequence from its logits
// row, on the logits' device, so that only token ids cross to the host. Rows
// whose sequences are greedy (temperature <= 0) are chosen together by one
// Argmax; every other row by kernels::Sample with its own parameters and
// generation step, drawing exactly what the host would (the CUDA sampler
// reproduces the CPU's order of operations). Stateless; any thread.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "seam/core/tensor.h"
#include "seam/kernels/ops.h"

namespace seam::runtime {

struct TokenChoice {
  kernels::SamplingParams params;  // temperature <= 0: greedy
  int32_t step = 0;                // the sequence's generation step (seeds the draw)
};

// `logits` f32 [S, vocab] on any device, one row per entry of `choices`.
// Returns the S chosen token ids on the host. INVALID_ARGUMENT when the
// counts differ; a kernel's error otherwise.
absl::StatusOr<std::vector<int32_t>> ChooseTokens(const Tensor& logits, const std::vector<TokenChoice>& choices);

}  // namespace seam::runtime
