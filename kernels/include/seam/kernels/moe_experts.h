// A mixture-of-experts block's experts run on the tensors' own device, with
// no host round trip, so a decode step holding one can be a CUDA graph:
// order each row's routes by expert id (SortRoutesByExpert), group the
// routed (row, expert) pairs by expert (GroupByExpert), run every expert's
// matmul once over all of its pairs (ExpertMatmul: each expert weight is read
// once per call), then sum each row's weighted expert outputs
// (MoeFinalize). At most kMaxExpertPairs pairs per call (GroupByExpert is
// one block of threads: a step's routes, not a dataset's). The matmul is a
// GEMV per expert, made for decode: an expert's weight is streamed once per
// 8 of its pairs, so a large batch re-reads it (a MoE block chooses when to
// run its experts one by one instead: models/src/qwen3_moe_block.cc).
//
// The experts' weights are one stacked tensor [E, N, K] (expert e's matrix
// [N, K] is w[e]). Pair p of a routing ids [M, G] is (row p / G, slot
// p % G). Every op is deterministic: a pair's output depends only on its
// row, its expert's weight and, for ExpertMatmul, the order of the sum over
// K that the device fixes (fp32 accumulation; the CPU reference sums in
// index order, the CUDA kernel per lane then across the warp).
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "seam/core/tensor.h"

namespace seam::kernels {

inline constexpr int64_t kMaxExpertPairs = int64_t{1} << 24;  // routed pairs per call
inline constexpr int64_t kMaxRoutesPerRow = 64;   // G (top-k) per row
inline constexpr int64_t kMaxGroupedExperts = 4096;

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

// The rows of the grouped pairs in group order, for experts run one by one
// on slices of them: out[i] = x[order[i] / G] for i < offsets[E] (G = P / M;
// x [M, H]; out [P, H] of x's dtype); rows past the grouped pairs are left
// as they are.
absl::Status GatherPairs(const Tensor& x, const ExpertGroups& groups, const Tensor& out);

// GatherPairs's inverse for the experts' outputs: out[order[i]] = src[i] for
// i < offsets[E]. src, out: [P, H] of one dtype.
absl::Status ScatterPairs(const Tensor& src, const ExpertGroups& groups, const Tensor& out);

// out[t] = Σ_g scales[t, g] · expert_out[t, g] in fp32, g ascending, rounded
// once to out's dtype: the finalize MoeFinalizeAddRmsNorm fuses, alone, in
// the same arithmetic on each device (on CUDA each term a fused
// multiply-add, on the CPU a multiply then an add). expert_out: [T, G, H];
// scales: f32 [T, G]; out: [T, H] of expert_out's dtype or f32.
absl::Status MoeFinalize(const Tensor& expert_out, const Tensor& scales, const Tensor& out);

}  // namespace seam::kernels
