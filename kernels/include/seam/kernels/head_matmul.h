// HeadMatmul: one small matmul per attention head, in one call. Multi-head
// latent attention multiplies every head's slice of the activations by that
// head's own matrix (the absorbed up-projections W_UK and W_UV); this op does
// all heads at once (on CUDA one strided-batched cuBLASLt GEMM, batch = heads).
//
// Validates like the ops of ops.h (INVALID_ARGUMENT naming the argument and
// the sizes), runs on the device of its tensors, and on CUDA runs
// asynchronously on the calling thread's current stream (stream.h).
#pragma once

#include "absl/status/status.h"
#include "seam/core/tensor.h"

namespace seam::kernels {

// out[t, h, :] = w[h] · x[t, h, :] for x [T, H, K], w [H, N, K], out [T, H, N]:
// fp32 accumulation, one rounding to out's dtype (Matmul's conventions).
// x, w and out share one dtype, f32 or bf16 (others are refused by name).
// w is contiguous. x and out may be views of a wider row-major matrix (e.g.
// Reshape then Narrow along dim 2): last stride 1, head stride ≥ K (N for
// out), row stride ≥ (H - 1) · head stride + K (N); out must not overlap x.
// T, H or N may be 0; K = 0 writes zeros.
// CUDA: the first call of a shape on a thread builds its cuBLASLt plan (and
// may create the thread's cuBLASLt handle and workspace, like Matmul): run
// each shape once before capturing a CUDA graph; later calls neither allocate
// nor synchronise.
absl::Status HeadMatmul(const Tensor& x, const Tensor& w, const Tensor& out);

}  // namespace seam::kernels
