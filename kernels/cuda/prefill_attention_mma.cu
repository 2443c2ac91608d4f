// Prefill attention on tensor cores, FlashAttention-2 style: mma.sync
// m16n8k16 with the accumulators, softmax and probabilities in registers and
// K/V tiles streamed through shared memory by cp.async, each tile shared by
// the query heads of one KV group (bf16 / f16, head_dim 64 or 128;
// prefill_attention.cu chooses it).
#include <algorithm>
#include <cmath>

#include "attention_common.cuh"
#include "mma_fragments.cuh"
#include "prefill_fa_tile.cuh"
#include "split_workspace.cuh"

namespace seam::kernels::cuda::attn {
namespace {

// Same tiles as PrefillKernel (64 query rows, so FindTile applies): a block
// runs one query tile for kHeads query heads of one KV group (4 where 4
// divides the group, else 2 where 2 does, else 1), 4 warps of 16 rows per
// head, so each K/V tile is loaded once for kHeads x 64 rows. Both products run as mma.sync m16n8k16
// with fp32 accumulators that stay in registers (prefill_fa_tile.cuh): the
// scores come out in the layout of the P operand of P V, so the online
// softmax, the rescale of O and the rounding of P to T all happen in
// registers; K's fragments come by ldmatrix, V's by ldmatrix.trans. K/V tiles
// of 64 keys are gathered through the block table with cp.async into
// kStages shared-memory buffers, kStages - 1 tiles loading while one is used;
// the block-table entries of a tile are read one tile before its rows are
// needed, so no copy waits on them. Tiles are taken heaviest first (the last
// query tiles of a sequence see the most keys); key tiles past the query
// tile's last position are never loaded, and only tiles that reach past a
// warp's first row are masked.
//
// Context splits: the grid has at least enough blocks per head group to fill
// the SMs once (shapes only), and the blocks beyond the batch's actual query
// tiles (counted on the device) become splits of those tiles' keys, at least
// kFaMinTilesPerSplit key tiles each, as many as the waves over the SMs make
// worth it (ChooseSplits, on the device): a short chunk over a long cached
// prefix streams on every SM instead of one block per head group. A split
// leaves its partial softmax (the kHeads heads' rows: unnormalised outputs,
// maxima and sums) in the stream's split workspace and the last to arrive
// merges them.
constexpr int kFaRows = kTileRows;  // 4 warps x 16 rows per head
constexpr int kFaMinTilesPerSplit = 4;

// Shapes of a kernel instance: threads, cp.async stages (a stage: K and V
// tiles, 34 KB at kD 128, 18 KB at 64), the blocks per SM of its launch
// bounds, and where Q's fragments live. At kD 128 a warp holding Q in
// registers needs ~170-210 registers (the O, Q and S fragments alone are
// 128), while 16 warps per SM leave 128 each:
//   kHeads  kD   warps  stages  blocks/SM  Q
//   1       64   4      3       3          registers
//   1       128  4      2       3          registers
//   2       64   8      3       2          registers (128 registers)
//   2       128  8      4       1          registers (~210 registers)
//   4       64   16     3       1          registers (128 registers)
//   4       128  16     3       1          shared memory (+34 KB x 2; 170 KB)
template <int kD, int kHeads>
struct FaConfig {
  static_assert(kHeads == 1 || kHeads == 2 || kHeads == 4, "1, 2 or 4 heads per block");
  static constexpr int kThreads = 128 * kHeads;
  static constexpr int kStages = kHeads == 1 && kD == 128 ? 2 : (kHeads == 2 && kD == 128 ? 4 : 3);
  static constexpr int kBlocksPerSm = kHeads == 1 ? 3 : (kHeads == 2 && kD == 64 ? 2 : 1);
  static constexpr bool kQInSmem = kHeads == 4 && kD == 128;
  static constexpr int kLd = kD + 8;  // row stride in elements: conflict-free ldmatrix
  static constexpr size_t kTileElems = size_t{kFaKeys} * kLd;
  static constexpr size_t kQElems = kQInSmem ? size_t{kHeads} * kFaRows * kLd : 0;
  static constexpr size_t kBytes = (kStages * 2 * kTileElems + kQElems) * 2;  // K and V per stage, Q; 2-byte elements
  static constexpr int kPartialFloats = kHeads * kFaRows * (kD + 2);  // one split's partial
};

// The (query tile, split) of this block: block x takes split x / n of tile
// n - 1 - x % n (n query tiles in the batch, heaviest first); each tile's key
// tiles divide into at most gridDim.x / n splits (1 without a workspace, or
// when the partials would not fit it), the workspace's slots laid out for
// that many.
struct FaWork {
  int seq, q0;        // the tile: sequence, first query row (seq -1: none)
  int unit;           // tile * gridDim.y + head group: the merge counter
  int split, splits;  // this block's split and the splits of the launch
  int tiles;          // query tiles in the batch
};

__device__ __forceinline__ FaWork FaWorkOf(const AttnParams& p, const SplitArgs& sa, int partial_floats, int* info) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (warp == 0) {
    const int n = CountTiles(p);
    const int x = static_cast<int>(blockIdx.x);
    if (n > 0) FindTile(p, n - 1 - x % n, &info[0], &info[1]);
    if (lane == 0) {
      if (n == 0) info[0] = -1;
      int splits = n > 0 ? static_cast<int>(gridDim.x) / n : 1;
      const int64_t units = static_cast<int64_t>(n) * gridDim.y;
      if (sa.partials == nullptr || units > kSplitCounters) splits = 1;
      const int64_t fit = static_cast<int64_t>(kSplitPartialFloats) / (units > 0 ? units * partial_floats : 1);
      splits = static_cast<int>(splits < fit ? splits : (fit > 1 ? fit : 1));
      info[2] = n > 0 ? x / n : 0;
      info[3] = splits;
      info[4] = n > 0 ? (n - 1 - x % n) * static_cast<int>(gridDim.y) + static_cast<int>(blockIdx.y) : 0;
      info[5] = n;
      if (info[2] >= splits) info[0] = -1;
    }
  }
  __syncthreads();
  return {info[0], info[1], info[4], info[2], info[3], info[5]};
}

// Where a split's partial lives: slot (unit * splits + split) of the
// workspace, kHeads x kFaRows rows of kD outputs, then all slots' (max, sum)
// pairs.
template <int kD, int kHeads>
struct FaSlots {
  float* o;   // this slot's outputs [kHeads * kFaRows][kD]
  float* ml;  // this slot's (max, sum) [kHeads * kFaRows][2]
};

template <int kD, int kHeads>
__device__ __forceinline__ FaSlots<kD, kHeads> FaSlotOf(const SplitArgs& sa, const FaWork& w, int split) {
  constexpr size_t kRows = size_t{kHeads} * kFaRows;
  const size_t slot = static_cast<size_t>(w.unit) * w.splits + split;
  const size_t slots = static_cast<size_t>(w.tiles) * gridDim.y * w.splits;
  return {sa.partials + slot * kRows * kD, sa.partials + slots * kRows * kD + slot * kRows * 2};
}

// Writes this warp's rows (row r_lo and r_lo + 8 of the block's kHeads x
// kFaRows) of a split's partial.
template <int kD, int kHeads>
__device__ __forceinline__ void FaStorePartial(const SplitArgs& sa, const FaWork& w, const FaRows<kD>& r, int r_lo) {
  const int tq = threadIdx.x % 4;
  const FaSlots<kD, kHeads> at = FaSlotOf<kD, kHeads>(sa, w, w.split);
#pragma unroll
  for (int nt = 0; nt < kD / 8; ++nt) {
    *reinterpret_cast<float2*>(at.o + r_lo * kD + nt * 8 + 2 * tq) = make_float2(r.o[nt][0], r.o[nt][1]);
    *reinterpret_cast<float2*>(at.o + (r_lo + 8) * kD + nt * 8 + 2 * tq) = make_float2(r.o[nt][2], r.o[nt][3]);
  }
  if (tq == 0) {
    at.ml[r_lo * 2] = r.m_lo;
    at.ml[r_lo * 2 + 1] = r.l_lo;
    at.ml[(r_lo + 8) * 2] = r.m_hi;
    at.ml[(r_lo + 8) * 2 + 1] = r.l_hi;
  }
}

// The last split of a tile to arrive: merges the `active` partials of its
// rows (of every head of the block) into the output, in split order.
template <typename T, int kD, int kHeads>
__device__ void FaMergeSplits(const AttnParams& p, const SplitArgs& sa, const FaWork& w, int active, int64_t row0,
                              int rows) {
  constexpr int kRows = kHeads * kFaRows;
  const FaSlots<kD, kHeads> first = FaSlotOf<kD, kHeads>(sa, w, 0);
  T* out = static_cast<T*>(p.out);
  const int h0 = static_cast<int>(blockIdx.y) * kHeads;
  for (int e = static_cast<int>(threadIdx.x); e < kRows * kD; e += static_cast<int>(blockDim.x)) {
    const int rr = e / kD, col = e % kD, hh = rr / kFaRows, r = rr % kFaRows;
    if (r >= rows || row0 + r >= p.q_rows) continue;
    float num, den, m;
    MergeSplitPartials<true>(first.o + rr * kD + col, first.ml + rr * 2, active, kRows * kD, kRows * 2, &num, &den,
                             &m);
    out[((row0 + r) * p.hq + h0 + hh) * kD + col] = FromFloat<T>(den > 0.0f ? num * (1.0f / den) : 0.0f);
  }
}

// Grid (max(ceil(T / kFaRows) + B, SM slots / (Hq / kHeads)), Hq / kHeads);
// needs 16-byte aligned q and caches, caches of fewer than 2^31 rows, and
// kHeads dividing the group.
template <typename T, int kD, int kHeads>
__global__ void __launch_bounds__(FaConfig<kD, kHeads>::kThreads, FaConfig<kD, kHeads>::kBlocksPerSm)
    PrefillFaKernel(AttnParams p, SplitArgs sa) {
  using C = FaConfig<kD, kHeads>;
  constexpr int kStages = C::kStages;
  constexpr int kChunks = kD / 8;                               // 16-byte pieces of a row
  constexpr int kPerThread = kFaKeys * kChunks / C::kThreads;  // 16-byte copies per thread and tile (of K, of V)
  static_assert(kFaKeys * kChunks % C::kThreads == 0, "whole copies per thread");
  extern __shared__ __align__(128) unsigned char fa_smem[];
  T* kv_s = reinterpret_cast<T*>(fa_smem);  // [stage][K, V][kFaKeys][kLd]
  __shared__ int info[6];
  __shared__ int rows_s[kStages][kFaKeys];

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const FaWork work = FaWorkOf(p, sa, C::kPartialFloats, info);
  const int b = work.seq;
  if (b < 0) return;
  const int q0 = work.q0;

  const int h = static_cast<int>(blockIdx.y) * kHeads + warp / 4, g = h / p.group;
  const SeqView seq = SeqOf(p, b);
  const QueryTile tile = QueryTileOf(seq, q0);
  const int rows = tile.rows;
  const int first_pos = tile.first_pos, last_pos = tile.last_pos;  // positions of the tile's first and last rows
  const T* k_cache = static_cast<const T*>(p.k_cache);
  const T* v_cache = static_cast<const T*>(p.v_cache);

  // This lane's rows w0 + gr and w0 + gr + 8 of the tile (rows past the
  // tile's end act as its last row: finite scores, never written).
  const int gr = lane / 4, tq = lane % 4;
  const int w0 = 16 * (warp % 4);
  const int r_lo = w0 + gr, r_hi = r_lo + 8;
  const int pos_lo = r_lo < rows ? first_pos + r_lo : last_pos;
  const int pos_hi = r_hi < rows ? first_pos + r_hi : last_pos;
  const int warp_first = first_pos + w0;
  const int warp_last = w0 < rows ? first_pos + (w0 + 15 < rows ? w0 + 15 : rows - 1) : -1;
  const int64_t row_lo = static_cast<int64_t>(seq.q_begin) + q0 + r_lo;
  const int64_t row_hi = row_lo + 8;
  const bool ok_lo = r_lo < rows && row_lo < p.q_rows;
  const bool ok_hi = r_hi < rows && row_hi < p.q_rows;

  // The cache row of key tid of the tile at k0 (threads 0 .. 63; -1: past
  // the tile's last position, or a block outside the cache: a zero row),
  // and the copies of a tile whose rows are in `rows` into stage buf.
  auto row_of = [&](int k0) { return tid < kFaKeys && k0 + tid <= last_pos ? RowOf(seq.table, k0 + tid, p) : -1; };
  auto load_tile = [&](const int* rows, int buf) {
    T* k_s = kv_s + static_cast<size_t>(buf) * 2 * C::kTileElems;
    T* v_s = k_s + C::kTileElems;
#pragma unroll
    for (int i = 0; i < kPerThread; ++i) {
      const int e = tid + i * C::kThreads, t = e / kChunks, c = e % kChunks;
      const int row = rows[t];
      const int64_t at = row >= 0 ? (static_cast<int64_t>(row) * p.hk + g) * kD + c * 8 : 0;
      CpAsync16(k_s + t * C::kLd + c * 8, k_cache + at, row >= 0);
      CpAsync16(v_s + t * C::kLd + c * 8, v_cache + at, row >= 0);
    }
  };

  FaRows<kD> acc;
  FaInit(acc);
  const float scale_log2 = p.scale * kFaLog2e;

  // This split's key tiles: an equal share of the tile's, at least
  // kFaMinTilesPerSplit, in as many splits as pay for themselves (the
  // batch's tiles x head groups in waves over the SMs; at most work.splits).
  const int key_tiles = last_pos >= 0 ? last_pos / kFaKeys + 1 : 0;
  const int want = static_cast<int>(ChooseSplits(static_cast<int64_t>(work.tiles) * gridDim.y, key_tiles,
                                                 kFaMinTilesPerSplit, sa.slots, C::kPartialFloats, work.splits));
  const int per_split = max((key_tiles + want - 1) / want, kFaMinTilesPerSplit);
  const int active = key_tiles > 0 ? (key_tiles + per_split - 1) / per_split : 1;
  if (work.split >= active) return;
  const int t0 = work.split * per_split, tiles = min(per_split, key_tiles - t0);
  // Q: fragments in registers, or (kQInSmem) the block's rows in shared
  // memory after the K/V stages, copied with the first tile (the Q copies
  // join its cp.async group).
  uint32_t qf[C::kQInSmem ? 1 : kD / 16][4];
  T* q_s = kv_s + kStages * 2 * C::kTileElems;  // [kHeads * kFaRows][kLd]
  if constexpr (C::kQInSmem) {
    const T* q = static_cast<const T*>(p.q);
    for (int e = tid; e < kHeads * kFaRows * kChunks; e += C::kThreads) {
      const int rr = e / kChunks, c = e % kChunks, r = rr % kFaRows;
      const int64_t row = static_cast<int64_t>(seq.q_begin) + q0 + r;
      const bool ok = r < rows && row < p.q_rows;
      const int hh = static_cast<int>(blockIdx.y) * kHeads + rr / kFaRows;
      CpAsync16(q_s + rr * C::kLd + c * 8, q + ((ok ? row : 0) * p.hq + hh) * kD + c * 8, ok);
    }
  } else {
    FaLoadQ<T, kD>(qf, static_cast<const T*>(p.q), p.hq, h, row_lo, row_hi, ok_lo, ok_hi, tq);
  }

  // Tile i's cache rows sit in rows_s[i % kStages], written at the end of
  // step i - kStages from a value read a step before that; tile i loads
  // into stage i % kStages during step i - kStages + 1 (the first
  // kStages - 1 tiles before the loop), so no copy waits on the block table.
#pragma unroll
  for (int j = 0; j < kStages; ++j) {
    if (j < tiles && tid < kFaKeys) rows_s[j][tid] = row_of((t0 + j) * kFaKeys);
  }
  __syncthreads();
#pragma unroll
  for (int j = 0; j < kStages - 1; ++j) {
    if (j < tiles) load_tile(rows_s[j], j);
    CpAsyncCommit();
  }
  int pending = tiles > kStages ? row_of((t0 + kStages) * kFaKeys) : -1;
  for (int i = 0; i < tiles; ++i) {
    const int ahead = i + kStages - 1;
    if (ahead < tiles) load_tile(rows_s[ahead % kStages], ahead % kStages);
    CpAsyncCommit();
    CpAsyncWait<kStages - 1>();  // tile i has landed (for this thread) ...
    __syncthreads();             // ... and for every thread
    const int k0 = (t0 + i) * kFaKeys;
    if (k0 <= warp_last) {
      const T* k_s = kv_s + static_cast<size_t>(i % kStages) * 2 * C::kTileElems;
      float s[kFaKeys / 8][4];
      FaScores<T, kD, C::kQInSmem>(s, qf, q_s + warp * 16 * C::kLd, k_s, k0, warp_last, scale_log2, lane);
      if (k0 + kFaKeys - 1 > warp_first) FaMask(s, k0, pos_lo, pos_hi, tq);  // reaches past some row's position
      uint32_t pf[kFaKeys / 16][4];
      FaSoftmax<T, kD>(acc, s, pf);
      FaAccumulate<T, kD>(acc, pf, k_s + C::kTileElems, k0, warp_last, lane);
    }
    if (tid < kFaKeys) rows_s[i % kStages][tid] = pending;  // tile i + kStages's rows (tile i's were used)
    pending = i + kStages + 1 < tiles ? row_of((t0 + i + kStages + 1) * kFaKeys) : -1;
    __syncthreads();  // stage i % kStages is refilled with tile i + kStages, with these rows
  }

  CpAsyncWait<0>();  // nothing in flight at exit (a malformed tile of no keys copied only Q)
  FaFinishSums(acc);
  if (active > 1) {
    FaStorePartial<kD, kHeads>(sa, work, acc, (warp / 4) * kFaRows + r_lo);
    if (ArriveLast(sa.counters, work.unit, active, &info[0])) {
      FaMergeSplits<T, kD, kHeads>(p, sa, work, active, static_cast<int64_t>(seq.q_begin) + q0, rows);
    }
    return;
  }
  FaStoreRows<T, kD>(acc, static_cast<T*>(p.out), p.hq, h, row_lo, row_hi, ok_lo, ok_hi, tq);
}

template <typename T, int kD, int kHeads>
absl::Status LaunchPrefillFaHeads(const AttnParams& p, cudaStream_t stream) {
  using C = FaConfig<kD, kHeads>;
  auto kernel = PrefillFaKernel<T, kD, kHeads>;
  SEAM_CUDA_RETURN_IF_ERROR(
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(C::kBytes)));
  int device = 0, sms = 0;
  SEAM_CUDA_RETURN_IF_ERROR(cudaGetDevice(&device));
  SEAM_CUDA_RETURN_IF_ERROR(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  // At least the tiles' bound, and enough blocks per head group for one wave
  // over the SMs: those past the actual tiles split their keys.
  const int head_groups = std::max(p.hq / kHeads, 1);
  const int64_t tiles = (p.q_rows + kFaRows - 1) / kFaRows + p.num_seqs;
  const int slots = sms * C::kBlocksPerSm;
  const int64_t blocks = std::max<int64_t>(tiles, static_cast<int64_t>(slots) / head_groups);
  const SplitWorkspace* ws = SplitWorkspaceFor(stream);
  const SplitArgs sa = ws != nullptr ? SplitArgs{ws->partials, ws->counters, slots} : SplitArgs{nullptr, nullptr, slots};
  const dim3 grid(static_cast<unsigned int>(blocks), static_cast<unsigned int>(head_groups));
  kernel<<<grid, C::kThreads, C::kBytes, stream>>>(p, sa);
  SEAM_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return absl::OkStatus();
}

}  // namespace

template <typename T, int kD>
absl::Status LaunchPrefillFa(const AttnParams& p, cudaStream_t stream) {
  // Four (two) heads of a group share each K/V tile where 4 (2) divides the group.
  if (p.group % 4 == 0) return LaunchPrefillFaHeads<T, kD, 4>(p, stream);
  if (p.group % 2 == 0) return LaunchPrefillFaHeads<T, kD, 2>(p, stream);
  return LaunchPrefillFaHeads<T, kD, 1>(p, stream);
}

template absl::Status LaunchPrefillFa<__nv_bfloat16, 64>(const AttnParams& p, cudaStream_t stream);
template absl::Status LaunchPrefillFa<__nv_bfloat16, 128>(const AttnParams& p, cudaStream_t stream);
template absl::Status LaunchPrefillFa<__half, 64>(const AttnParams& p, cudaStream_t stream);
template absl::Status LaunchPrefillFa<__half, 128>(const AttnParams& p, cudaStream_t stream);

}  // namespace seam::kernels::cuda::attn
