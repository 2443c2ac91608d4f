// The tensor ops seam's models are built from: one signature per op, the same
// for every device. Each call validates shapes and dtypes (INVALID_ARGUMENT
// naming the argument and the sizes), then runs the CPU reference or the CUDA
// kernel according to the tensors' device. Arithmetic is fp32 for every
// storage dtype; outputs are rounded once to their dtype.
//
// Layout conventions (row-major, contiguous unless stated):
//   tokens are rows: activations are [T, H]; heads are [T, heads, head_dim].
//   Linear weights use the Hugging Face layout [out_features, in_features].
// CUDA ops run on the calling thread's current stream (see stream.h) and are
// asynchronous; CPU ops are synchronous.
#pragma once

#include <cstdint>
#include <limits>

#include "absl/status/status.h"
#include "seam/core/tensor.h"

namespace seam::kernels {

// out[M, N] = x[M, K] · w[N, K]ᵀ. x and w may be f32/bf16/f16 (converted to fp32
// on CPU); out any floating dtype. M may be 0. w is a weight: on CUDA the
// decode GEMV may start reading it before the kernel just before it on the
// stream has finished (programmatic_launch.h), so no kernel of the step may write it.
absl::Status Matmul(const Tensor& x, const Tensor& w, const Tensor& out);

// out[T, H] = table[ids[t] - vocab_start] for ids inside [vocab_start, vocab_start + V),
// zero rows for ids outside (vocab-parallel shards). ids: i32 [T]; table: [V, H].
absl::Status Embedding(const Tensor& ids, const Tensor& table, int64_t vocab_start, const Tensor& out);

// out = x / sqrt(mean(x²) + eps) * weight, per row. x, out: [T, H]; weight: [H].
absl::Status RmsNorm(const Tensor& x, const Tensor& weight, float eps, const Tensor& out);

// Fused residual add + RMSNorm: s = x + residual in fp32; residual ← round(s);
// out ← RMSNorm of the fp32 sum s (not of the rounded residual). x, residual,
// out: [T, H]; weight: [H]. `out` may alias `x`.
absl::Status FusedAddRmsNorm(const Tensor& x, const Tensor& residual, const Tensor& weight, float eps,
                             const Tensor& out);

// Fused MoE finalize + residual add + RMSNorm: f = Σ_k scales[t, k] ·
// expert_out[t, k, :] accumulated in fp32 in k order; s = f + residual in
// fp32; residual ← round(s); out ← RMSNorm of the fp32 s. expert_out:
// [T, K, H]; scales: f32 [T, K]; residual, out: [T, H] (out must not alias
// residual); weight: [H]. A caller completing a sum over ranks sums
// expert_out first (the finalize is linear in it).
absl::Status MoeFinalizeAddRmsNorm(const Tensor& expert_out, const Tensor& scales, const Tensor& residual,
                                   const Tensor& weight, float eps, const Tensor& out);

// out[T, I] = silu(gate) * up where input[T, 2I] = [gate | up] along columns.
absl::Status SiluAndMul(const Tensor& input, const Tensor& out);

// Rotary embedding, NeoX/HF style (rotate_half over the first `rotary_dim`
// features of each head), in place. q: [T, Hq, D]; k: [T, Hk, D];
// positions: i32 [T]; inv_freq[i] = theta^(-2i/rotary_dim).
absl::Status RotaryEmbedding(const Tensor& q, const Tensor& k, const Tensor& positions, float theta,
                             int64_t rotary_dim);

// dst += src elementwise (fp32 add, rounded once). Same shape; dtypes may differ.
absl::Status AddInPlace(const Tensor& dst, const Tensor& src);

// ---- attention over a paged KV cache ------------------------------------------
// Cache tensors are [num_blocks, block_size, Hk, D]. A sequence's tokens live in
// the blocks its block table lists: token position p sits in block
// table[p / block_size] at offset p % block_size.

// Writes k, v ([T, Hk, D]) into the caches at flat slots (block * block_size + offset);
// slot_mapping: i32 [T]; a negative slot skips the token (padding).
absl::Status WriteKvCache(const Tensor& k, const Tensor& v, const Tensor& slot_mapping, const Tensor& k_cache,
                          const Tensor& v_cache);

// Qwen3's attention input in one pass. qkv [T, (Hq + 2·Hk)·D] holds each
// token's q, k and v projections side by side. Per head, q and k get an
// RMSNorm over D (weights q_norm, k_norm [D]; rounded to their dtype) and then
// the rotary embedding of RotaryEmbedding (rotary_dim = D); q lands in
// q_out [T, Hq, D], and k and v are written into the caches at slot_mapping
// as WriteKvCache does (negative slots skip the token). Hk = the caches' kv
// heads. Equal to RmsNorm + RotaryEmbedding + WriteKvCache on copies of the
// three column ranges, without their launches and round trips.
absl::Status QkvNormRopeCache(const Tensor& qkv, const Tensor& q_norm, const Tensor& k_norm, float eps,
                              const Tensor& positions, float theta, const Tensor& slot_mapping,
                              const Tensor& k_cache, const Tensor& v_cache, const Tensor& q_out);

struct AttentionBatch {
  Tensor query_start;   // i32 [B + 1]: rows of q belonging to sequence b are [qs[b], qs[b+1])
  Tensor context_lens;  // i32 [B]: tokens in the cache for sequence b, including this step's
  Tensor block_tables;  // i32 [B, max_blocks]
};

// Causal grouped-query attention: out[T, Hq, D]. Query row i of sequence b sits
// at position context_lens[b] - q_len[b] + i and attends to cache positions
// ≤ its own. Hq must be a multiple of Hk. Covers prefill (q_len == context),
// decode (q_len == 1) and chunked prefill. Softmax in fp32 with max subtraction.
absl::Status PagedAttention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                            const AttentionBatch& batch, float scale, const Tensor& out);

// ---- probabilities and sampling ------------------------------------------------

// Row-wise softmax in fp32: out[T, N].
absl::Status Softmax(const Tensor& x, const Tensor& out);

// out: i32 [T], index of the largest value of each row (lowest index on ties).
absl::Status Argmax(const Tensor& logits, const Tensor& out);

struct SamplingParams {
  float temperature = 1.0f;  // ≤ 0 means greedy (argmax)
  int32_t top_k = 0;         // 0 = all
  float top_p = 1.0f;        // nucleus mass in (0, 1]
  uint64_t seed = 0;
};

// out: i32 [T]. Row t is one sequence's step: it draws with the uniform
// number SampleUniform(seed, steps[t]), keyed by the sequence's seed and
// generation step alone, so a sequence draws the same token wherever it sits
// in a batch (rows that share a seed and a step share their uniform: give
// each sequence its own seed, seam::SequenceSeed). The same bits on every
// device. steps: i32 [T] (generation step of each row's sequence).
absl::Status Sample(const Tensor& logits, const SamplingParams& params, const Tensor& steps, const Tensor& out);

// Counter-based uniform in [0, 1): the same bits on CPU and GPU.
float SampleUniform(uint64_t seed, uint64_t step);

// Edits of single logits before a token is chosen (penalties, logit_bias,
// min_tokens), one per (row, token) pair, each pair at most once:
//   x = logits[row, token];
//   if (repetition != 1) x = x > 0 ? x / repetition : x * repetition;
//   x = x + offset;
// in fp32, each operation rounded (the CUDA kernel does exactly this, so
// both devices edit to the same bits). logits: f32 [T, N], edited in place;
// at: i32 [E, 2] (row, token); by: f32 [E, 2] (repetition, offset). An
// offset of -inf masks the token. Pairs outside [0, T) x [0, N) are skipped
// (indices are not read on the host).
absl::Status EditLogits(const Tensor& logits, const Tensor& at, const Tensor& by);

// Log-probabilities of given tokens under each row's softmax:
// out[t, k] = logits[t, tokens[t, k]] - (max_t + log Σ exp(logits[t] - max_t)),
// in fp32. logits: floating [T, N]; tokens: i32 [T, K]; out: f32 [T, K]. A
// token outside [0, N) gives NaN. CPU and CUDA sum in different orders:
// equal within 1e-5 absolute for rows of up to 2^18 entries.
absl::Status TokenLogProbs(const Tensor& logits, const Tensor& tokens, const Tensor& out);

// Row-wise top-k of x[T, N]: values (f32 [T, k], descending) and indices (i32 [T, k]);
// ties go to the lower index.
absl::Status TopK(const Tensor& x, int64_t k, const Tensor& values, const Tensor& indices);

// ---- mixture-of-experts routing ----------------------------------------------

// Router of a sparse block: softmax over each row of logits f32 [T, E] in fp32,
// the top_k experts (ties to the lower index) with their probabilities, divided
// by their sum when `renormalize`. weights: f32 [T, top_k] (descending);
// ids: i32 [T, top_k].
absl::Status MoeRoute(const Tensor& logits, int64_t top_k, bool renormalize, const Tensor& weights,
                      const Tensor& ids);

// A router with a choice bias (LongCat-Flash's, whose zero-computation
// experts share the softmax): p = softmax of each row of logits [T, E] in
// fp32 (MoeRoute's arithmetic); the top_k experts by p[e] + bias[e] (an fp32
// add; ties to the lower index), in that order; each weight p · scaling (an
// fp32 multiply, no renormalisation). bias: f32 [E]; weights: f32 [T, top_k];
// ids: i32 [T, top_k]. No host synchronisation (a CUDA graph may hold it).
absl::Status MoeRouteBiased(const Tensor& logits, const Tensor& bias, int64_t top_k, float scaling,
                            const Tensor& weights, const Tensor& ids);

// out[i] = x[rows[i]] for i in [0, M). x: [N, H]; rows: i32 [M] inside [0, N);
// out: [M, H], same dtype as x.
absl::Status GatherRows(const Tensor& x, const Tensor& rows, const Tensor& out);

// Expert finalize: dst[rows[i]] += weights[i] · src[i] (fp32 arithmetic, rounded
// once per call). dst: [N, H]; src: [M, H]; rows: i32 [M], distinct, inside
// [0, N); weights: f32 [M].
absl::Status ScatterAddRows(const Tensor& dst, const Tensor& src, const Tensor& rows, const Tensor& weights);

// ---- state-space (Mamba2) mixers and the squared-ReLU MLP ---------------------

// out = max(x, 0)² elementwise. x, out: same shape.
absl::Status ReluSquared(const Tensor& x, const Tensor& out);

// The sequences of a step and where their recurrent states live: rows
// [query_start[s], query_start[s + 1]) of the token tensors belong to
// sequence s, whose state is slot state_slots[s] of a state tensor. A
// negative slot (padding) computes its rows from a zero state and writes
// nothing back. Slots are not checked against each other: two sequences of
// one step must not share one.
struct SequenceStates {
  Tensor query_start;  // i32 [S + 1], non-decreasing from 0 to T
  Tensor state_slots;  // i32 [S]
};

// Causal depthwise conv1d continuing each sequence from its state:
// out[t, c] = act(bias[c] + Σ_k weight[c, k] · u[t + k, c]) for k in [0, K),
// where u is the sequence's K - 1 previous inputs (conv_state[slot], oldest
// first) followed by its rows of x; act is SiLU when `silu`, the identity
// otherwise. Afterwards conv_state[slot] holds the last K - 1 entries of u.
// Covers prefill (many rows) and the one-token decode update alike.
// x, out: [T, C]; weight: [C, K]; bias: [C] or undefined (no bias);
// conv_state: [slots, K - 1, C].
absl::Status CausalConv1d(const Tensor& x, const Tensor& weight, const Tensor& bias, bool silu,
                          const Tensor& conv_state, const SequenceStates& seqs, const Tensor& out);

// Mamba2's selective state-space recurrence within each sequence: for head
// h and its group g = h / (H / G),
//   dt' = clamp(softplus(dt[t, h] + dt_bias[h]), dt_min, dt_max)
//   state[h] ← exp(dt' · a[h]) · state[h] + dt' · x[t, h, :] ⊗ b[t, g, :]
//   out[t, h, :] = state[h] · c[t, g, :] + d[h] · x[t, h, :]
// with softplus(v) = v above 20 (as torch's). The state stays fp32 between
// steps. Prefill and single-token decode alike.
//
// How it runs (SelectiveScanParams::algorithm): the CPU always runs the
// exact recurrence token by token in fp32 (the reference). On CUDA,
// kSequential runs the same recurrence; kChunked runs Mamba2's chunked
// state-space-dual form: each sequence cut into chunks of `chunk` tokens,
// within a chunk the outputs as matmuls on tensor cores (C·Bᵀ masked by the
// decays, times x; plus C times the state entering the chunk), the state
// passed from chunk to chunk in fp32 and read and written once per
// sequence. The chunked form sums in another order and feeds the tensor
// cores operands rounded to x's dtype (the decay-weighted C·Bᵀ, the state,
// x times its decay), as Mamba2's own kernels do: outputs agree with the
// recurrence to a few of that dtype's ulps of their scale (the tests state
// the bound). kAuto: chunked for a call with more tokens than sequences
// where it serves (ChunkedScanTakes), else sequential (decode).
enum class ScanAlgorithm : uint8_t { kAuto, kSequential, kChunked };
inline constexpr int64_t kDefaultScanChunk = 64;
// Whether the CUDA chunked kernel serves x of `dtype` with heads of
// `head_dim` rows and `state` entries: bf16 / f16, head_dim a multiple of
// 32, state 64 or 128.
bool ChunkedScanTakes(DType dtype, int64_t head_dim, int64_t state);

struct SelectiveScanParams {
  Tensor x;          // [T, H, P]
  Tensor dt;         // [T, H], before the bias and softplus
  Tensor dt_bias;    // [H]
  Tensor a;          // [H]: A = -exp(A_log)
  Tensor b, c;       // [T, G, N]
  Tensor d;          // [H]
  float dt_min = 0.0f;
  float dt_max = std::numeric_limits<float>::infinity();
  Tensor ssm_state;  // f32 [slots, H, P, N]
  SequenceStates seqs;
  Tensor out;        // [T, H, P]
  ScanAlgorithm algorithm = ScanAlgorithm::kAuto;
  int64_t chunk = 0;  // kChunked's chunk length: 32 or 64 (0: kDefaultScanChunk)
};
absl::Status SelectiveScan(const SelectiveScanParams& params);

// Mamba2's grouped gated RMSNorm: g = x · silu(z) in fp32; each run of
// `group_size` features is divided by its own sqrt(mean(g²) + eps); out =
// weight · that. x, z, out: [T, D]; weight: [D]; group_size divides D.
absl::Status GatedRmsNorm(const Tensor& x, const Tensor& z, const Tensor& weight, int64_t group_size, float eps,
                          const Tensor& out);

}  // namespace seam::kernels
