// Multi-head latent attention (DeepSeek-V2/V3, LongCat-Flash) over a paged
// latent cache, in its absorbed form: every query head reads the same
// compressed row per token, so the cache holds one row per token for all heads.
//
// Latent cache: [num_blocks, block_size, Dc + Dr], f32, bf16 or f16, paged exactly as PagedAttention's caches: token p of a sequence
// sits in block table[p / block_size] at offset p % block_size. Each row holds
// the normalized compressed kv (Dc entries) then the roped key part (Dr
// entries). Dc is the output's last dimension; Dr = cache row - Dc (may be 0).
//
// Both ops validate like the ops of ops.h (INVALID_ARGUMENT naming the argument
// and the sizes), run on the device of their tensors, and on CUDA run
// asynchronously on the calling thread's current stream (stream.h).
#pragma once

#include "absl/status/status.h"
#include "seam/core/tensor.h"
#include "seam/kernels/ops.h"

namespace seam::kernels {

// Writes latent [T, Dc + Dr] into latent_cache at the flat slots of
// slot_mapping (i32 [T], block * block_size + offset); a negative slot skips
// its token (padding). Values are rounded once to the cache's dtype.
absl::Status WriteLatentCache(const Tensor& latent, const Tensor& slot_mapping, const Tensor& latent_cache);

// Absorbed MLA. q: [T, Hq, Dc + Dr], per head q_nope·W_UK (Dc entries) then
// q_pe (Dr entries); out: [T, Hq, Dc] in q's dtype. For each query row and
// head:
//   out = Σ_p softmax_p(scale · q·row_p) · row_p[:Dc]
// over the cache rows the query may see, causal exactly as PagedAttention
// with the same AttentionBatch: query row i of sequence b sits at position
// context_lens[b] - q_len[b] + i and sees positions 0 .. its own. Covers
// decode, prefill and chunked prefill in one batch. Softmax in fp32 with max
// subtraction; outputs rounded once to their dtype.
//
// Numerics per device: the CPU computes everything in fp32. CUDA with bf16 q
// and cache at Dc 512 / Dr 64 runs tensor cores: scores from the bf16
// operands with fp32 accumulation (exact products), the probabilities
// rounded to bf16 for the P·V product (the sum divides by the rounded
// weights' own sum); every other call runs an fp32 CUDA-core kernel.
// Index values are checked on the CPU (INVALID_ARGUMENT); CUDA does not
// read them on the host: a slot past the cache is skipped, a block id
// outside the cache reads as a zero row, a context longer than the block
// table is cut to the table.
absl::Status PagedLatentAttention(const Tensor& q, const Tensor& latent_cache, const AttentionBatch& batch,
                                  float scale, const Tensor& out);

}  // namespace seam::kernels
