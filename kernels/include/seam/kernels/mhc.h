// The mixes of manifold-constrained hyper-connections (MHC) as tensor ops,
// beside ops.h: the residual of n streams is stored [T, n·H], stream i in
// columns [i·H, (i+1)·H). Both mixes accumulate in fp32 in index order with
// separate multiplies and adds (no fused multiply-add) and round once, on
// the host (CPU reference) or on CUDA (same order, same rounding). The
// coefficients are plain values the caller owns; nothing is retained.
#pragma once

#include <vector>

#include "absl/status/status.h"
#include "seam/core/tensor.h"

namespace seam::kernels {

inline constexpr int kMaxMhcStreams = 8;

// Post mix, in place: stream i ← Σ_j res[i·n + j] · X_j + post[i] · y (the
// post term added last). residual: [T, n·H]; y: [T, H]; res: n·n values;
// post: n values; 1 ≤ n ≤ kMaxMhcStreams. INVALID_ARGUMENT names a bad size.
absl::Status MhcPostMix(const Tensor& residual, const Tensor& y, const std::vector<float>& res,
                        const std::vector<float>& post);

// Pre mix: out[T, H] ← Σ_i pre[i] · X_i. residual: [T, n·H]; pre: n values.
absl::Status MhcPreMix(const Tensor& residual, const std::vector<float>& pre, const Tensor& out);

}  // namespace seam::kernels
