// The split merge of tensor-core latent attention: LatentMmaKernel leaves
// each split's unnormalised output rows and (max, sum) per pack row in the
// stream's split workspace (Partials, latent_pack.cuh); this kernel turns
// them into the output rows of every pack that split, and leaves alone the
// packs that did not (their block stored its rows already).
//
// Row m of a pack is out = sum_i o_i w_i / sum_i l_i w_i over the pack's
// active splits i (in that order), w_i = 2^(m_i - M) with M the largest
// max; a split that saw no key of the row has m_i = -inf, l_i = 0, o_i = 0
// and weighs 0, and a row with no visible key at all stores zeros.
//
// Work: one warp per (pack row, column part), with no block barrier after
// the pack is found. The lanes load the row's statistics, one split per
// lane and round, take M and the denominator with shuffles and keep the
// weights in the warp's slice of shared memory; then they sum the partial
// rows as float4 columns, split by split, in rounds: a round's 16 coalesced
// 16-byte copies per lane (cp.async into the warp's stage) are all in
// flight before the lane waits for them. The rows are stored through
// StorePair. A block of kMergeWarps warps finds its pack once (grid
// (packs, head chunks, pack rows x parts / kMergeWarps)); the statistics'
// loads are issued before that, so the chain of dependent loads is
// query_start, the pack's context, then the partial rows. Few rows (small
// batches) cut each row into 2 or 4 column parts so the reads still spread
// over the GPU's multiprocessors. The order of every sum is fixed by the
// shapes: the same bits on every run, eager or replayed.
#include <cmath>

#include "latent_pack.cuh"
#include "mma_sync.cuh"

namespace seam::kernels::cuda::mla {
namespace {

constexpr int kMergeWarps = 4, kMergeThreads = kMergeWarps * 32;
constexpr int kRowVecs = kDc / 4;             // float4 columns of an output row
constexpr int kLoadsInFlight = 16;            // 16-byte copies per lane per round (a 32 KiB stage per block)
constexpr int kStatsPerLane = kMaxSplits / 32;
constexpr int kMinWarpsPerSm = 8;             // below this many row warps per SM, rows split into parts
static_assert(kMaxSplits % 32 == 0, "every lane weighs as many splits");

__device__ __forceinline__ float4 Fma4(float4 acc, float4 v, float w) {
  return make_float4(fmaf(v.x, w, acc.x), fmaf(v.y, w, acc.y), fmaf(v.z, w, acc.z), fmaf(v.w, w, acc.w));
}

// Grid (packs, head chunks, 16 kMt x kParts / kMergeWarps), kMergeThreads
// threads: warp g = z kMergeWarps + w of a block takes pack row g / kParts,
// columns of part g % kParts (lane t: float4 columns part kRowVecs / kParts
// + 32 j + t). Same grid x / y meaning as LatentMmaKernel's x / z, same
// shares. Partials are read past L1 (the attention kernel's blocks wrote
// them).
template <int kMt, int kParts>
__global__ void __launch_bounds__(kMergeThreads) LatentMergeKernel(LatentParams p, int nh, int qpp, int splits,
                                                                   const float* partials) {
  constexpr int kR = kMt * 16, kPerLane = kRowVecs / kParts / 32, kBatch = kLoadsInFlight / kPerLane;
  static_assert(kPerLane * kParts * 32 == kRowVecs && kBatch * kPerLane == kLoadsInFlight, "whole float4s per lane");
  static_assert(kR * kParts % kMergeWarps == 0, "every warp of the grid has a row part");
  __shared__ int seq_s, pack_s;
  __shared__ float w_s[kMergeWarps][kMaxSplits];
  __shared__ float4 stage_s[kMergeWarps][kLoadsInFlight][32];
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const int g = static_cast<int>(blockIdx.z) * kMergeWarps + warp, m = g / kParts, part = g % kParts;
  const size_t unit = static_cast<size_t>(blockIdx.x) * gridDim.y + blockIdx.y;
  const size_t slots = static_cast<size_t>(gridDim.x) * gridDim.y * splits;
  const Partials<kMt> first(const_cast<float*>(partials), unit, splits, 0, slots);

  // (max, sum) of splits lane + 32 c, loaded before the pack is known: every
  // slot of the grid lies in the workspace; only those of active splits are
  // used below.
  float2 ml[kStatsPerLane];
#pragma unroll
  for (int c = 0; c < kStatsPerLane; ++c) {
    const int i = lane + 32 * c;
    ml[c] = i < splits ? __ldcg(reinterpret_cast<const float2*>(first.ml + (static_cast<size_t>(i) * kR + m) * 2))
                       : make_float2(-INFINITY, 0.0f);
  }
  if (warp == 0) FindPack(p, qpp, static_cast<int>(blockIdx.x), &seq_s, &pack_s);
  __syncthreads();
  if (seq_s < 0) return;  // past the batch's last pack
  const Pack k = PackOf(p, seq_s, pack_s * qpp, nh, qpp, static_cast<int>(blockIdx.y));
  const int active = ShareOf(k, splits).active;
  if (active == 1 || !RowValid(k, m)) return;  // stored by the attention kernel / no such row (warp-uniform)

  float m_max = -INFINITY;
#pragma unroll
  for (int c = 0; c < kStatsPerLane; ++c) {
    if (lane + 32 * c < active) m_max = fmaxf(m_max, ml[c].x);
  }
  m_max = WarpMax(m_max);
  const float m_use = m_max == -INFINITY ? 0.0f : m_max;  // no split saw a key of this row
  float den = 0.0f;
#pragma unroll
  for (int c = 0; c < kStatsPerLane; ++c) {
    const int i = lane + 32 * c;
    const float w = i < active ? exp2f(ml[c].x - m_use) : 0.0f;  // 0 past the active splits: the last round's pad
    w_s[warp][i] = w;
    if (i < active) den += ml[c].y * w;
  }
  den = WarpSum(den);
  __syncwarp();  // the warp's weights are in w_s

  const int v0 = part * (kRowVecs / kParts) + lane;  // this lane's first float4 column
  const float* src = first.o + static_cast<size_t>(m) * kDc + 4 * v0;
  float4 acc[kPerLane];
#pragma unroll
  for (int j = 0; j < kPerLane; ++j) acc[j] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  // Rounds of kBatch splits: the lane's kLoadsInFlight copies of a round
  // are all issued (cp.async into its own stage slots: registers and ptxas'
  // schedule do not limit them) before it waits and sums them. Past
  // `active` a slot is zero-filled without a read and weighs 0: acc keeps
  // its value.
  for (int i0 = 0; i0 < active; i0 += kBatch) {
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      const bool real = i0 + b < active;
      const float* row = src + static_cast<size_t>(real ? i0 + b : 0) * kR * kDc;
#pragma unroll
      for (int j = 0; j < kPerLane; ++j) mma::CpAsync16(&stage_s[warp][b * kPerLane + j][lane], row + 128 * j, real);
    }
    mma::CpAsyncCommit();
    mma::CpAsyncWait<0>();  // this lane's copies landed; a lane reads back only its own slots
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      const float w = w_s[warp][i0 + b];
#pragma unroll
      for (int j = 0; j < kPerLane; ++j) acc[j] = Fma4(acc[j], stage_s[warp][b * kPerLane + j][lane], w);
    }
    __syncwarp();  // the stage is read before the next round's copies refill it
  }
  const float inv = den > 0.0f ? 1.0f / den : 0.0f;
#pragma unroll
  for (int j = 0; j < kPerLane; ++j) {
    const int col = 4 * (v0 + 32 * j);
    StorePair(p, k, m, col, acc[j].x * inv, acc[j].y * inv);
    StorePair(p, k, m, col + 2, acc[j].z * inv, acc[j].w * inv);
  }
}

template <int kMt, int kParts>
absl::Status LaunchMergeWith(const LatentParams& p, const SplitGrid& g, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned int>(g.packs), static_cast<unsigned int>(g.head_chunks),
                  kMt * 16 * kParts / kMergeWarps);
  LatentMergeKernel<kMt, kParts><<<grid, kMergeThreads, 0, stream>>>(p, g.nh, g.qpp, g.splits, g.partials);
  SEAM_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return absl::OkStatus();
}

// Column parts per row: the fewest of 1, 2, 4 that give every
// multiprocessor kMinWarpsPerSm row warps (shapes only: the grid's rows
// bound the batch's).
template <int kMt>
absl::Status LaunchMergeOf(const LatentParams& p, const SplitGrid& g, cudaStream_t stream) {
  const int64_t row_warps = g.packs * g.head_chunks * kMt * 16;
  const int64_t want = static_cast<int64_t>(g.sms) * kMinWarpsPerSm;
  if (row_warps >= want) return LaunchMergeWith<kMt, 1>(p, g, stream);
  if (row_warps * 2 >= want) return LaunchMergeWith<kMt, 2>(p, g, stream);
  return LaunchMergeWith<kMt, 4>(p, g, stream);
}

}  // namespace

absl::Status LaunchLatentMerge(const LatentParams& p, const SplitGrid& g, cudaStream_t stream) {
  if (g.splits < 2 || g.splits > kMaxSplits) {
    return absl::InvalidArgumentError(absl::StrCat("LatentMerge: ", g.splits, " splits, not 2 .. ", kMaxSplits));
  }
  if (g.packs <= 0 || g.packs > 0x7fffffff || g.head_chunks <= 0 || g.head_chunks > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("LatentMerge: grid of ", g.packs, " packs x ", g.head_chunks, " head chunks"));
  }
  switch (g.mt) {
    case 1:
      return LaunchMergeOf<1>(p, g, stream);
    case 2:
      return LaunchMergeOf<2>(p, g, stream);
    case 4:
      return LaunchMergeOf<4>(p, g, stream);
    default:
      return absl::InvalidArgumentError(absl::StrCat("LatentMerge: ", g.mt, " m tiles, not 1, 2 or 4"));
  }
}

}  // namespace seam::kernels::cuda::mla
