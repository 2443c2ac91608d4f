// A mixture-of-experts block's experts run on the tensors' own device, with
// no host round trip, so a step holding one can be a CUDA graph at any
// batch size: order each row's routes by expert id (SortRoutesByExpert),
// group the routed (row, expert) pairs by expert (GroupByExpert), run every
// expert once over all of its pairs, then sum each row's weighted expert
// outputs (MoeFinalize). At most kMaxExpertPairs pairs per call
// (GroupByExpert is one block of threads: a step's routes, not a dataset's).
//
// Two ways to run the experts' matmuls:
// - the fused pair (ExpertGateUpSilu, then ExpertDown): gate and up
//   projections with the SiLU-mul in one pass, writing the activations in
//   group order, then the down projection stored back in pair order; on
//   CUDA either a GEMV made for decode (each weight row streamed once per 8
//   of its expert's pairs, whatever few pairs an expert has) or a
//   tensor-core grouped GEMM (one launch over every expert's tiles of
//   kExpertTileRows pairs), chosen by ExpertKernel;
// - ExpertMatmul, one projection at a time (the earlier GEMV; a MoE block
//   still runs it when asked: models/src/routed_experts.cc).
//
// The experts' weights are one stacked tensor [E, N, K] (expert e's matrix
// [N, K] is w[e]). Pair p of a routing ids [M, G] is (row p / G, slot
// p % G). Every op is deterministic: a pair's output depends only on its
// row, its expert's weight and the order of the sum over K that the kernel
// fixes (fp32 accumulation; the CPU reference sums in index order), never
// on how many pairs share its expert or the call.
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "seam/core/tensor.h"

namespace seam::kernels {

inline constexpr int64_t kMaxExpertPairs = int64_t{1} << 24;  // routed pairs per call
inline constexpr int64_t kMaxRoutesPerRow = 64;   // G (top-k) per row
inline constexpr int64_t kMaxGroupedExperts = 4096;
// The tensor-core kernel covers an expert's pairs in tiles of this many.
inline constexpr int64_t kExpertTileRows = 64;

// In place: each row of the routes (weights f32 [T, G], ids i32 [T, G],
// ids distinct within a row, as MoeRoute writes them) reordered by
// ascending expert id, each weight moving with its id.
absl::Status SortRoutesByExpert(const Tensor& weights, const Tensor& ids);

// The pairs of one routing grouped by expert. Built by GroupByExpert, read
// by ExpertMatmul; all i32 on the routing's device.
struct ExpertGroups {
  Tensor offsets;  // [E + 1]: expert e's pairs are order[offsets[e], offsets[e + 1])
  Tensor order;    // [P]: pair indices, grouped by ascending expert
  Tensor active;   // [1 + min(E, P)]: the number of experts with a pair, then their ids ascending
  // [1 + min(E, P)]: tile_starts[s] = the kExpertTileRows-row tiles of the
  // active experts before the s-th (s ≤ active[0]; the last is their total).
  Tensor tile_starts;

  // Unfilled buffers for `experts` experts and `pairs` pairs on `device`.
  static absl::StatusOr<ExpertGroups> Empty(int64_t experts, int64_t pairs, Device device);
  int64_t experts() const { return offsets.numel() - 1; }
  int64_t pairs() const { return order.numel(); }
};

// Fills `groups` from ids (i32, any shape, P = numel ≤ kMaxExpertPairs
// pairs; E = groups.experts() ≤ kMaxGroupedExperts). A pair whose id is outside [0, E) is
// in no group. Within an expert the order of its pairs is unspecified (the
// CUDA kernel places them by atomics); nothing computed from the groups
// depends on it.
absl::Status GroupByExpert(const Tensor& ids, const ExpertGroups& groups);

// out[p] = x[p / G] · w[e(p)]ᵀ for every grouped pair p, where G = P / M
// (x [M, K], out [P, N], P a multiple of M) and e(p) its expert; rows of
// pairs in no group are left as they are. w: [E, N, K] and out of x's dtype
// (f32, bf16 or f16); fp32 sums, rounded once. ExpertMatmulTakes says which
// (dtype, K) the CUDA kernel serves (16-byte rows, 16-byte aligned x and w);
// the CPU reference serves all.
absl::Status ExpertMatmul(const Tensor& x, const Tensor& w, const ExpertGroups& groups, const Tensor& out);
bool ExpertMatmulTakes(DType dtype, int64_t k);

// How the fused expert ops run on CUDA (the CPU reference ignores it).
enum class ExpertKernel : uint8_t {
  // kGemv up to kTensorCorePairs pairs, kTensorCore above (bf16 / f16; f32
  // always kGemv).
  kAuto,
  // Per expert and 8 of its pairs at a time, each weight row streamed once
  // per pass in 16-byte lane slices against the pairs' rows staged in shared
  // memory: bandwidth-bound at decode, where an expert has a few pairs.
  kGemv,
  // mma.sync tiles of kExpertTileRows pairs × 64 features over every
  // expert's pairs in one launch (bf16 / f16): prefill-sized batches.
  kTensorCore,
};
// kAuto's crossover in pairs (rows × top-k), measured on an H200
// (seam-bench-gpu moe-kernels, top-8, uniform routing, bf16): at 256 pairs
// the GEMV and the tensor-core kernel are within 5 % of each other
// (Qwen3-30B-A3B's shape 416 vs 437 us, LongCat-Flash's 1977 vs 1890 us);
// at 512 the tensor-core kernel is 1.6x faster at both (468 vs 755 us,
// 1909 vs 3070 us).
inline constexpr int64_t kTensorCorePairs = 256;
// The kernel kAuto picks for `pairs` pairs of `dtype`.
ExpertKernel ChooseExpertKernel(ExpertKernel kernel, DType dtype, int64_t pairs);

// act[i] = silu(g) · u for the grouped pairs i < offsets[E], in group order
// (row i of act belongs to pair order[i]), where for j < I
//   g = x[order[i] / G] · w[e, j]ᵀ   and   u = x[order[i] / G] · w[e, I + j]ᵀ,
// e is the expert of group position i and w [E, 2I, K] holds each expert's
// gate rows, then its up rows. g and u are summed in fp32 and each rounded
// to x's dtype, then silu(g) · u runs in fp32 and is rounded once: the
// arithmetic of ExpertMatmul followed by SiluAndMul, without their [P, 2I]
// intermediate. x [M, K] (P a multiple of M, G = P / M); act [P, I] of x's
// dtype; rows past offsets[E] are left as they are.
absl::Status ExpertGateUpSilu(const Tensor& x, const Tensor& w, const ExpertGroups& groups, const Tensor& act,
                              ExpertKernel kernel = ExpertKernel::kAuto);

// The down projection back to pair order: out[order[i]] = act[i] · w[e]ᵀ for
// i < offsets[E] (act in group order, as ExpertGateUpSilu writes it), fp32
// sums rounded once. act [P, I]; w [E, N, I]; out [P, N], all of one dtype;
// rows of pairs in no group are left as they are.
absl::Status ExpertDown(const Tensor& act, const Tensor& w, const ExpertGroups& groups, const Tensor& out,
                        ExpertKernel kernel = ExpertKernel::kAuto);

// Whether the CUDA kernel `kernel` (after ChooseExpertKernel) serves a
// weight of `dtype` with K columns: 16-byte rows for the GEMV, bf16 / f16
// with K a multiple of 8 for the tensor-core kernel. The CPU reference
// serves all.
bool ExpertKernelTakes(ExpertKernel kernel, DType dtype, int64_t k);

// The rows of the grouped pairs in group order, for experts run one by one
// on slices of them: out[i] = x[order[i] / G] for i < offsets[E] (G = P / M;
// x [M, H]; out [P, H] of x's dtype); rows past the grouped pairs are left
// as they are.
absl::Status GatherPairs(const Tensor& x, const ExpertGroups& groups, const Tensor& out);

// GatherPairs's inverse for the experts' outputs: out[order[i]] = src[i] for
// i < offsets[E]. src, out: [P, H] of one dtype.
absl::Status ScatterPairs(const Tensor& src, const ExpertGroups& groups, const Tensor& out);

// The slots of identity (zero-computation) experts, whose ids are ≥ `first`
// (the grouped experts' count: GroupByExpert leaves them in no group): for
// each pair p = (row t, slot g) of ids [M, G] with ids[p] ≥ first, out[p] =
// x[t] when `copy_input`, zeros otherwise (a rank of a sum that must count
// the input once only: not its rank 0). Other rows of out are left as they
// are. x [M, H]; out [M·G, H] of x's dtype. No host synchronisation.
absl::Status IdentityExpertPairs(const Tensor& x, const Tensor& ids, int64_t first, bool copy_input,
                                 const Tensor& out);

// out[t] = Σ_g scales[t, g] · expert_out[t, g] in fp32, g ascending, rounded
// once to out's dtype: the finalize MoeFinalizeAddRmsNorm fuses, alone, in
// the same arithmetic on each device (on CUDA each term a fused
// multiply-add, on the CPU a multiply then an add). expert_out: [T, G, H];
// scales: f32 [T, G]; out: [T, H] of expert_out's dtype or f32.
absl::Status MoeFinalize(const Tensor& expert_out, const Tensor& scales, const Tensor& out);

}  // namespace seam::kernels
