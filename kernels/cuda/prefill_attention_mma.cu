// Prefill attention on tensor cores, FlashAttention-2 style: mma.sync
// m16n8k16 with the accumulators, softmax and probabilities in registers and
// K/V double-buffered by cp.async (bf16 / f16, head_dim 64 or 128;
// prefill_attention.cu chooses it).
#include <algorithm>
#include <cmath>

#include "attention_common.cuh"
#include "mma_fragments.cuh"
#include "split_workspace.cuh"

namespace seam::kernels::cuda::attn {
namespace {

// Same tiles as PrefillKernel (64 query rows, so FindTile applies), 4 warps
// of 16 rows each. Both products run as mma.sync m16n8k16 with fp32
// accumulators that stay in registers: the scores come out in the layout of
// the P operand of P V, so the online softmax (rows split over the 4 lanes of
// a quad), the rescale of O and the rounding of P to T all happen in
// registers. K/V tiles of 64 keys are gathered through the block table with
// cp.async into two shared-memory buffers, the next tile loading while the
// current one is used; the block-table entries of a tile are read one tile
// earlier, so no copy waits on them. Tiles are taken heaviest first (the
// last query tiles of a sequence see the most keys); key tiles past the
// query tile's last position are never loaded, and only tiles that reach
// past a warp's first row are masked.
//
// Context splits: the grid has at least enough blocks per head to fill the
// SMs once (shapes only), and the blocks beyond the batch's actual query
// tiles (counted on the device) become splits of those tiles' keys, at least
// kFaMinTilesPerSplit key tiles each, as many as the waves over the SMs make
// worth it (ChooseSplits, on the device): a short chunk over a long cached
// prefix streams on every SM instead of one block per head. A split leaves its
// partial softmax (rows' unnormalised outputs, maxima and sums) in the
// stream's split workspace and the last to arrive merges them.
constexpr int kFaRows = kTileRows;  // 4 warps x 16 rows
constexpr int kFaKeys = 64;
constexpr int kFaThreads = 128;
constexpr int kFaMinTilesPerSplit = 4;
constexpr int kFaBlocksPerSm = 3;  // the kernel's launch bounds

template <int kD>
struct FaSmem {
  static constexpr int kLd = kD + 8;  // row stride in elements: conflict-free fragment reads
  static constexpr size_t kTileElems = size_t{kFaKeys} * kLd;
  static constexpr size_t kBytes = 4 * kTileElems * 2;  // two buffers of K and V, 2-byte elements
};

// The (query tile, split) of this block: block x takes split x / n of tile
// n - 1 - x % n (n query tiles in the batch, heaviest first); each tile's key
// tiles divide into at most gridDim.x / n splits (1 without a workspace, or
// when the partials would not fit it), the workspace's slots laid out for
// that many.
struct FaWork {
  int seq, q0;        // the tile: sequence, first query row (seq -1: none)
  int unit;           // tile * Hq + head: the merge counter
  int split, splits;  // this block's split and the splits of the launch
  int tiles;          // query tiles in the batch
};

__device__ __forceinline__ FaWork FaWorkOf(const AttnParams& p, const SplitArgs& sa, int kd, int* info) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (warp == 0) {
    const int n = CountTiles(p);
    const int x = static_cast<int>(blockIdx.x);
    if (n > 0) FindTile(p, n - 1 - x % n, &info[0], &info[1]);
    if (lane == 0) {
      if (n == 0) info[0] = -1;
      int splits = n > 0 ? static_cast<int>(gridDim.x) / n : 1;
      const int64_t units = static_cast<int64_t>(n) * p.hq;
      if (sa.partials == nullptr || units > kSplitCounters) splits = 1;
      const int64_t fit = static_cast<int64_t>(kSplitPartialFloats) / (units > 0 ? units * kFaRows * (kd + 2) : 1);
      splits = static_cast<int>(splits < fit ? splits : (fit > 1 ? fit : 1));
      info[2] = n > 0 ? x / n : 0;
      info[3] = splits;
      info[4] = n > 0 ? (n - 1 - x % n) * p.hq + static_cast<int>(blockIdx.y) : 0;
      info[5] = n;
      if (info[2] >= splits) info[0] = -1;
    }
  }
  __syncthreads();
  return {info[0], info[1], info[4], info[2], info[3], info[5]};
}

// Writes this warp's rows of a split's partial: unnormalised outputs, and
// (max, sum) per row, at slot (unit * splits + split) of the workspace.
template <int kD>
__device__ __forceinline__ void FaStorePartial(const SplitArgs& sa, const FaWork& w, const float (&o)[kD / 8][4],
                                               float m_lo, float m_hi, float l_lo, float l_hi) {
  const int lane = threadIdx.x % 32, gr = lane / 4, tq = lane % 4, r_lo = 16 * (threadIdx.x / 32) + gr;
  const size_t slot = static_cast<size_t>(w.unit) * w.splits + w.split;
  const size_t slots = static_cast<size_t>(w.tiles) * gridDim.y * w.splits;
  float* ws_o = sa.partials + slot * kFaRows * kD;
  float* ws_ml = sa.partials + slots * kFaRows * kD + slot * kFaRows * 2;
#pragma unroll
  for (int nt = 0; nt < kD / 8; ++nt) {
    *reinterpret_cast<float2*>(ws_o + r_lo * kD + nt * 8 + 2 * tq) = make_float2(o[nt][0], o[nt][1]);
    *reinterpret_cast<float2*>(ws_o + (r_lo + 8) * kD + nt * 8 + 2 * tq) = make_float2(o[nt][2], o[nt][3]);
  }
  if (tq == 0) {
    ws_ml[r_lo * 2] = m_lo;
    ws_ml[r_lo * 2 + 1] = l_lo;
    ws_ml[(r_lo + 8) * 2] = m_hi;
    ws_ml[(r_lo + 8) * 2 + 1] = l_hi;
  }
}

// The last split of a tile to arrive: merges the `active` partials of its
// rows into the output.
template <typename T, int kD>
__device__ void FaMergeSplits(const AttnParams& p, const SplitArgs& sa, const FaWork& w, int active, int64_t row0,
                              int rows) {
  const size_t slots = static_cast<size_t>(w.tiles) * gridDim.y * w.splits;
  const float* first_o = sa.partials + static_cast<size_t>(w.unit) * w.splits * kFaRows * kD;
  const float* first_ml = sa.partials + slots * kFaRows * kD + static_cast<size_t>(w.unit) * w.splits * kFaRows * 2;
  T* out = static_cast<T*>(p.out);
  const int h = static_cast<int>(blockIdx.y);
  for (int e = static_cast<int>(threadIdx.x); e < rows * kD; e += static_cast<int>(blockDim.x)) {
    const int r = e / kD, col = e % kD;
    if (row0 + r >= p.q_rows) continue;
    float num, den, m;
    MergeSplitPartials<true>(first_o + r * kD + col, first_ml + r * 2, active, kFaRows * kD, kFaRows * 2, &num, &den,
                             &m);
    out[((row0 + r) * p.hq + h) * kD + col] = FromFloat<T>(den > 0.0f ? num * (1.0f / den) : 0.0f);
  }
}

// Grid (max(ceil(T / kFaRows) + B, SM slots / Hq), Hq); needs 16-byte aligned
// q and caches, and caches of fewer than 2^31 rows.
template <typename T, int kD>
__global__ void __launch_bounds__(kFaThreads, kFaBlocksPerSm) PrefillFaKernel(AttnParams p, SplitArgs sa) {
  using L = FaSmem<kD>;
  constexpr int kLd = L::kLd;
  constexpr int kChunks = kD / 8;       // 16-byte pieces of a row
  constexpr int kKSteps = kD / 16;      // k steps of Q K^T
  constexpr int kOTiles = kD / 8;       // n tiles of O
  constexpr int kSTiles = kFaKeys / 8;  // n tiles of S
  constexpr int kPSteps = kFaKeys / 16;  // k steps of P V
  constexpr int kPerThread = kFaKeys * kChunks / kFaThreads;  // 16-byte copies per thread and tile (of K, of V)
  constexpr float kLog2e = 1.4426950408889634f;
  extern __shared__ __align__(128) unsigned char fa_smem[];
  T* kv_s = reinterpret_cast<T*>(fa_smem);  // [buffer][K, V][kFaKeys][kLd]
  __shared__ int info[6];
  __shared__ int rows_s[2][kFaKeys];

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const FaWork work = FaWorkOf(p, sa, kD, info);
  const int b = work.seq;
  if (b < 0) return;
  const int q0 = work.q0;

  const int h = blockIdx.y, g = h / p.group;
  const SeqView seq = SeqOf(p, b);
  const QueryTile tile = QueryTileOf(seq, q0);
  const int q_begin = seq.q_begin, rows = tile.rows;
  const int first_pos = tile.first_pos, last_pos = tile.last_pos;  // positions of the tile's first and last rows
  const int32_t* table = seq.table;
  const T* q = static_cast<const T*>(p.q);
  const T* k_cache = static_cast<const T*>(p.k_cache);
  const T* v_cache = static_cast<const T*>(p.v_cache);
  T* out = static_cast<T*>(p.out);

  // This lane's rows w0 + gr and w0 + gr + 8 (rows past the tile's end act
  // as its last row: finite scores, never written).
  const int gr = lane / 4, tq = lane % 4;
  const int w0 = 16 * warp;
  const int r_lo = w0 + gr, r_hi = r_lo + 8;
  const int pos_lo = r_lo < rows ? first_pos + r_lo : last_pos;
  const int pos_hi = r_hi < rows ? first_pos + r_hi : last_pos;
  const int warp_first = first_pos + w0;
  const int warp_last = w0 < rows ? first_pos + (w0 + 15 < rows ? w0 + 15 : rows - 1) : -1;
  const int64_t row_lo = static_cast<int64_t>(q_begin) + q0 + r_lo;
  const int64_t row_hi = row_lo + 8;
  const bool ok_lo = r_lo < rows && row_lo < p.q_rows;
  const bool ok_hi = r_hi < rows && row_hi < p.q_rows;

  // Q fragments, straight from global memory.
  uint32_t qf[kKSteps][4];
  {
    const T* q_lo = q + ((ok_lo ? row_lo : 0) * p.hq + h) * kD + 2 * tq;
    const T* q_hi = q + ((ok_hi ? row_hi : 0) * p.hq + h) * kD + 2 * tq;
#pragma unroll
    for (int kk = 0; kk < kKSteps; ++kk) {
      qf[kk][0] = ok_lo ? *reinterpret_cast<const uint32_t*>(q_lo + kk * 16) : 0u;
      qf[kk][1] = ok_hi ? *reinterpret_cast<const uint32_t*>(q_hi + kk * 16) : 0u;
      qf[kk][2] = ok_lo ? *reinterpret_cast<const uint32_t*>(q_lo + kk * 16 + 8) : 0u;
      qf[kk][3] = ok_hi ? *reinterpret_cast<const uint32_t*>(q_hi + kk * 16 + 8) : 0u;
    }
  }

  // The cache row of key tid of the tile at k0 (threads 0 .. 63; -1: past
  // the tile's last position, or a block outside the cache: a zero row),
  // and the copies of a tile whose rows are in `rows` into buffer buf.
  auto row_of = [&](int k0) { return tid < kFaKeys && k0 + tid <= last_pos ? RowOf(table, k0 + tid, p) : -1; };
  auto load_tile = [&](const int* rows, int buf) {
    T* k_s = kv_s + static_cast<size_t>(buf) * 2 * L::kTileElems;
    T* v_s = k_s + L::kTileElems;
#pragma unroll
    for (int i = 0; i < kPerThread; ++i) {
      const int e = tid + i * kFaThreads, t = e / kChunks, c = e % kChunks;
      const int row = rows[t];
      const int64_t at = row >= 0 ? (static_cast<int64_t>(row) * p.hk + g) * kD + c * 8 : 0;
      CpAsync16(k_s + t * kLd + c * 8, k_cache + at, row >= 0);
      CpAsync16(v_s + t * kLd + c * 8, v_cache + at, row >= 0);
    }
  };

  float o[kOTiles][4];
#pragma unroll
  for (int nt = 0; nt < kOTiles; ++nt) o[nt][0] = o[nt][1] = o[nt][2] = o[nt][3] = 0.0f;
  float m_lo = -INFINITY, m_hi = -INFINITY, l_lo = 0.0f, l_hi = 0.0f;  // m in the log2 domain
  const float scale_log2 = p.scale * kLog2e;

  // This split's key tiles: an equal share of the tile's, at least
  // kFaMinTilesPerSplit, in as many splits as pay for themselves (the
  // batch's tiles in waves over the SMs; at most work.splits).
  const int key_tiles = last_pos >= 0 ? last_pos / kFaKeys + 1 : 0;
  const int want = static_cast<int>(ChooseSplits(static_cast<int64_t>(work.tiles) * p.hq, key_tiles,
                                                 kFaMinTilesPerSplit, sa.slots, kFaRows * (kD + 2), work.splits));
  const int per_split = max((key_tiles + want - 1) / want, kFaMinTilesPerSplit);
  const int active = key_tiles > 0 ? (key_tiles + per_split - 1) / per_split : 1;
  if (work.split >= active) return;
  const int t0 = work.split * per_split, tiles = min(per_split, key_tiles - t0);
  // Tile i's cache rows sit in rows_s[i & 1], written two steps ahead from a
  // value read a step before that: no copy waits on the block table.
  if (tiles > 0 && tid < kFaKeys) rows_s[0][tid] = row_of(t0 * kFaKeys);
  if (tiles > 1 && tid < kFaKeys) rows_s[1][tid] = row_of((t0 + 1) * kFaKeys);
  __syncthreads();
  if (tiles > 0) load_tile(rows_s[0], 0);
  CpAsyncCommit();
  int pending = tiles > 2 ? row_of((t0 + 2) * kFaKeys) : -1;
  for (int i = 0; i < tiles; ++i) {
    if (i + 1 < tiles) load_tile(rows_s[(i + 1) & 1], (i + 1) & 1);
    CpAsyncCommit();
    CpAsyncWait<1>();  // tile i has landed (for this thread) ...
    __syncthreads();   // ... and for every thread
    const int k0 = (t0 + i) * kFaKeys;
    if (k0 <= warp_last) {
      const T* k_s = kv_s + static_cast<size_t>(i & 1) * 2 * L::kTileElems;
      const T* v_s = k_s + L::kTileElems;

      // S = Q K^T: lane (gr, tq) holds rows gr, gr + 8, keys 8 nt + 2 tq + {0, 1}.
      float s[kSTiles][4];
#pragma unroll
      for (int nt = 0; nt < kSTiles; ++nt) {
        s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.0f;
        if (k0 + nt * 8 > warp_last) continue;  // all in every row's future: masked below
        const T* krow = k_s + (nt * 8 + gr) * kLd + 2 * tq;
#pragma unroll
        for (int kk = 0; kk < kKSteps; ++kk) {
          const uint32_t b0 = *reinterpret_cast<const uint32_t*>(krow + kk * 16);
          const uint32_t b1 = *reinterpret_cast<const uint32_t*>(krow + kk * 16 + 8);
          Mma16816<T>(s[nt], qf[kk], b0, b1);
        }
      }
#pragma unroll
      for (int nt = 0; nt < kSTiles; ++nt) {
#pragma unroll
        for (int j = 0; j < 4; ++j) s[nt][j] *= scale_log2;
      }
      if (k0 + kFaKeys - 1 > warp_first) {  // the tile reaches past some row's position
#pragma unroll
        for (int nt = 0; nt < kSTiles; ++nt) {
#pragma unroll
          for (int j = 0; j < 2; ++j) {
            const int key = k0 + nt * 8 + 2 * tq + j;
            if (key > pos_lo) s[nt][j] = -INFINITY;
            if (key > pos_hi) s[nt][2 + j] = -INFINITY;
          }
        }
      }

      // Online softmax; the 4 lanes of a quad share a row.
      float mx_lo = -INFINITY, mx_hi = -INFINITY;
#pragma unroll
      for (int nt = 0; nt < kSTiles; ++nt) {
        mx_lo = fmaxf(mx_lo, fmaxf(s[nt][0], s[nt][1]));
        mx_hi = fmaxf(mx_hi, fmaxf(s[nt][2], s[nt][3]));
      }
      mx_lo = fmaxf(mx_lo, __shfl_xor_sync(kFullMask, mx_lo, 1));
      mx_lo = fmaxf(mx_lo, __shfl_xor_sync(kFullMask, mx_lo, 2));
      mx_hi = fmaxf(mx_hi, __shfl_xor_sync(kFullMask, mx_hi, 1));
      mx_hi = fmaxf(mx_hi, __shfl_xor_sync(kFullMask, mx_hi, 2));
      const float mn_lo = fmaxf(m_lo, mx_lo), mn_hi = fmaxf(m_hi, mx_hi);
      const float mu_lo = mn_lo == -INFINITY ? 0.0f : mn_lo;  // only rows that saw nothing yet
      const float mu_hi = mn_hi == -INFINITY ? 0.0f : mn_hi;
      const float alpha_lo = exp2f(m_lo - mu_lo), alpha_hi = exp2f(m_hi - mu_hi);
      m_lo = mn_lo;
      m_hi = mn_hi;
      l_lo *= alpha_lo;
      l_hi *= alpha_hi;
#pragma unroll
      for (int nt = 0; nt < kOTiles; ++nt) {
        o[nt][0] *= alpha_lo;
        o[nt][1] *= alpha_lo;
        o[nt][2] *= alpha_hi;
        o[nt][3] *= alpha_hi;
      }
      // P rounded to T (the weights P V uses, so they sum to l exactly), laid
      // out as the A operand of P V.
      uint32_t pf[kPSteps][4];
#pragma unroll
      for (int nt = 0; nt < kSTiles; ++nt) {
        const T p0 = FromFloat<T>(exp2f(s[nt][0] - mu_lo));
        const T p1 = FromFloat<T>(exp2f(s[nt][1] - mu_lo));
        const T p2 = FromFloat<T>(exp2f(s[nt][2] - mu_hi));
        const T p3 = FromFloat<T>(exp2f(s[nt][3] - mu_hi));
        l_lo += ToFloat(p0) + ToFloat(p1);
        l_hi += ToFloat(p2) + ToFloat(p3);
        pf[nt / 2][(nt % 2) * 2] = PackPair(p0, p1);
        pf[nt / 2][(nt % 2) * 2 + 1] = PackPair(p2, p3);
      }

      // O += P V; ldmatrix.trans turns V's rows into B fragments of 16 keys
      // by 8 columns, two column tiles per load.
      const int v_row = (lane & 7) + ((lane >> 3) & 1) * 8;
      const int v_col = (lane >> 4) * 8;
#pragma unroll
      for (int j = 0; j < kPSteps; ++j) {
        if (k0 + j * 16 > warp_last) break;  // P is zero from here on
#pragma unroll
        for (int np = 0; np < kOTiles / 2; ++np) {
          uint32_t vb[4];
          LdMatrixX4Trans(vb, v_s + (j * 16 + v_row) * kLd + np * 16 + v_col);
          Mma16816<T>(o[2 * np], pf[j], vb[0], vb[1]);
          Mma16816<T>(o[2 * np + 1], pf[j], vb[2], vb[3]);
        }
      }
    }
    if (tid < kFaKeys) rows_s[i & 1][tid] = pending;  // tile i + 2's rows (tile i's were used)
    pending = i + 3 < tiles ? row_of((t0 + i + 3) * kFaKeys) : -1;
    __syncthreads();  // buffer i & 1 is refilled for tile i + 2, with these rows
  }

  l_lo += __shfl_xor_sync(kFullMask, l_lo, 1);
  l_lo += __shfl_xor_sync(kFullMask, l_lo, 2);
  l_hi += __shfl_xor_sync(kFullMask, l_hi, 1);
  l_hi += __shfl_xor_sync(kFullMask, l_hi, 2);
  if (active > 1) {
    FaStorePartial<kD>(sa, work, o, m_lo, m_hi, l_lo, l_hi);
    if (ArriveLast(sa.counters, work.unit, active, &info[0])) {
      FaMergeSplits<T, kD>(p, sa, work, active, static_cast<int64_t>(q_begin) + q0, rows);
    }
    return;
  }
  const float inv_lo = l_lo > 0.0f ? 1.0f / l_lo : 0.0f;
  const float inv_hi = l_hi > 0.0f ? 1.0f / l_hi : 0.0f;
  if (ok_lo) {
    T* dst = out + (row_lo * p.hq + h) * kD + 2 * tq;
#pragma unroll
    for (int nt = 0; nt < kOTiles; ++nt) {
      *reinterpret_cast<uint32_t*>(dst + nt * 8) =
          PackPair(FromFloat<T>(o[nt][0] * inv_lo), FromFloat<T>(o[nt][1] * inv_lo));
    }
  }
  if (ok_hi) {
    T* dst = out + (row_hi * p.hq + h) * kD + 2 * tq;
#pragma unroll
    for (int nt = 0; nt < kOTiles; ++nt) {
      *reinterpret_cast<uint32_t*>(dst + nt * 8) =
          PackPair(FromFloat<T>(o[nt][2] * inv_hi), FromFloat<T>(o[nt][3] * inv_hi));
    }
  }
}

}  // namespace

template <typename T, int kD>
absl::Status LaunchPrefillFa(const AttnParams& p, cudaStream_t stream) {
  auto kernel = PrefillFaKernel<T, kD>;
  constexpr size_t kBytes = FaSmem<kD>::kBytes;
  SEAM_CUDA_RETURN_IF_ERROR(
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(kBytes)));
  int device = 0, sms = 0;
  SEAM_CUDA_RETURN_IF_ERROR(cudaGetDevice(&device));
  SEAM_CUDA_RETURN_IF_ERROR(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  // At least the tiles' bound, and enough blocks per head for one wave over
  // the SMs: those past the actual tiles split their keys.
  const int64_t tiles = (p.q_rows + kFaRows - 1) / kFaRows + p.num_seqs;
  const int64_t blocks = std::max<int64_t>(tiles, static_cast<int64_t>(sms) * kFaBlocksPerSm / std::max(p.hq, 1));
  const SplitWorkspace* ws = SplitWorkspaceFor(stream);
  const int slots = sms * kFaBlocksPerSm;
  const SplitArgs sa = ws != nullptr ? SplitArgs{ws->partials, ws->counters, slots} : SplitArgs{nullptr, nullptr, slots};
  const dim3 grid(static_cast<unsigned int>(blocks), static_cast<unsigned int>(p.hq));
  kernel<<<grid, kFaThreads, kBytes, stream>>>(p, sa);
  SEAM_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return absl::OkStatus();
}

template absl::Status LaunchPrefillFa<__nv_bfloat16, 64>(const AttnParams& p, cudaStream_t stream);
template absl::Status LaunchPrefillFa<__nv_bfloat16, 128>(const AttnParams& p, cudaStream_t stream);
template absl::Status LaunchPrefillFa<__half, 64>(const AttnParams& p, cudaStream_t stream);
template absl::Status LaunchPrefillFa<__half, 128>(const AttnParams& p, cudaStream_t stream);

}  // namespace seam::kernels::cuda::attn
