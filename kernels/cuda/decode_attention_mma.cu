// Decode attention on tensor cores over the paged cache, the context split
// across thread blocks (bf16 / f16, head_dim 64, 128 or 256).
//
// A block serves one (sequence, kv head, split) and packs the query rows of
// the heads sharing that kv head into the 16 rows of one mma tile: row r is
// query row r / nh of the sequence for head h0 + r % nh (a decode row of a
// GQA group of 4 fills 4 rows; MHA packs up to 16 query rows of a short
// chunk). Both products run as mma.sync m16n8k16 with fp32 accumulators:
// S = Q K^T with K rows as the B operand, then O += P V with P rounded to T.
//
// Each warp streams its own 16-key chunks (chunks w, w + W, ... of the
// block's share of the context), gathering K and V rows through the block
// table with cp.async into a ring of kStages shared-memory stages: while it
// computes on one chunk, the next kStages - 1 are in flight, and the block
// table entries of the one after are already loaded. No block barrier runs
// inside the loop. The warps' partial softmaxes merge once in shared memory.
//
// Splits: the grid is (S, B, Hk * ceil(group / 16)) with S from shapes only
// (enough blocks for one wave over the SMs, at least W chunks per split at
// the block table's width); inside, a split takes an equal share of the
// sequence's actual context, so S splits work on short and long contexts
// alike and splits past the context exit at once. With more than one active
// split, each block writes its partial softmax to the stream's split
// workspace (split_workspace.cuh) and the last block of the (sequence, kv
// head) to arrive merges them: one launch, no host sync, capturable.
#include <algorithm>
#include <cmath>

#include "attention_common.cuh"
#include "mma_fragments.cuh"
#include "pdl_launch.cuh"
#include "split_workspace.cuh"

namespace seam::kernels::cuda::attn {
namespace {

constexpr int kMmaRows = 16;    // (query row, head) pairs of one block: one m16 tile
constexpr int kChunk = 16;      // keys a warp takes per step
constexpr int kMaxMmaSplits = 256;
constexpr float kLog2e = 1.4426950408889634f;

template <int kD, int kWarps, int kStages>
struct DecodeMmaLayout {
  static constexpr int kLd = kD + 8;  // row stride in elements: conflict-free ldmatrix
  static constexpr int kStageElems = 2 * kChunk * kLd;  // K rows, then V rows
  static constexpr size_t kQBytes = size_t{kMmaRows} * kLd * 2;
  static constexpr size_t kStreamBytes = size_t{kWarps} * kStages * kStageElems * 2;
  static constexpr size_t kMergeBytes = size_t{kWarps} * kMmaRows * (kD + 2) * 4;
  static constexpr size_t kBytes = kQBytes + (kStreamBytes > kMergeBytes ? kStreamBytes : kMergeBytes);
};

// The query rows one block runs together: mma row r < rows is query row
// r0 + r / nh of the sequence (global row row0 + r / nh) for head h0 + r % nh.
struct Pack {
  int64_t row0;
  int rows;
  int nh;
  int h0;
  int first_pos;  // position of query row r0
  int limit;      // keys the pack's last row sees (its position + 1)
};

// Position of mma row r; rows past the pack act as its last row.
__device__ __forceinline__ int PosOfRow(const Pack& k, int r) {
  return k.first_pos + (r < k.rows ? r : k.rows - 1) / k.nh;
}

// The cache row of key `lane` of chunk c (lanes 0 .. 15), -2 past the
// pack's last visible key, -1 for a block outside the cache (a zero row).
__device__ __forceinline__ int KeyRow(const AttnParams& p, const int32_t* table, int c, int limit, int lane) {
  const int pos = c * kChunk + lane;
  return lane < kChunk && pos < limit ? RowOf(table, pos, p) : -2;
}

template <int kD>
struct WarpSoftmax {
  float o[kD / 8][4];  // rows gr, gr + 8 (gr = lane / 4) of the output tile
  float m_lo, m_hi;    // running max in the log2 domain
  float l_lo, l_hi;    // this lane's share of the running sums
};

// Starts copying the pack's query rows into q_s (rows past the pack: zeros);
// they land with this thread's next cp.async group.
template <typename T, int kD>
__device__ void LoadPackQueries(const AttnParams& p, const Pack& k, T* q_s) {
  constexpr int kLd = kD + 8, kSegs = kD / 8;
  const T* q = static_cast<const T*>(p.q);
  for (int e = static_cast<int>(threadIdx.x); e < kMmaRows * kSegs; e += static_cast<int>(blockDim.x)) {
    const int r = e / kSegs, seg = e % kSegs;
    const int64_t row = k.row0 + r / k.nh;
    const bool valid = r < k.rows && row < p.q_rows;
    CpAsync16(q_s + r * kLd + seg * 8, q + (valid ? (row * p.hq + k.h0 + r % k.nh) * kD + seg * 8 : 0), valid);
  }
}

// Gathers the K and V rows of one chunk into a stage: lane l's row index
// `row` is that of key l; rows < 0 become zeros.
template <typename T, int kD>
__device__ __forceinline__ void IssueChunk(const T* k_cache, const T* v_cache, int64_t kv_stride, int64_t head_off,
                                           int row, T* stage) {
  constexpr int kLd = kD + 8, kSegs = kD / 8, kPerLane = kChunk * kSegs / 32;
  const int lane = static_cast<int>(threadIdx.x) % 32;
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) {
    const int e = i * 32 + lane, t = e / kSegs, seg = e % kSegs;
    const int key_row = __shfl_sync(kFullMask, row, t);
    const int64_t at = key_row >= 0 ? key_row * kv_stride + head_off + seg * 8 : 0;
    CpAsync16(stage + t * kLd + seg * 8, k_cache + at, key_row >= 0);
    CpAsync16(stage + (kChunk + t) * kLd + seg * 8, v_cache + at, key_row >= 0);
  }
}

template <int kD, bool kQInRegs>
using QFrags = uint32_t[kQInRegs ? kD / 16 : 1][4];

// s = Q K^T for the chunk's 16 keys: lane (gr, tq) gets rows gr, gr + 8 and
// keys 8 nt + 2 tq + {0, 1}.
template <typename T, int kD, bool kQInRegs>
__device__ __forceinline__ void ChunkScores(float (&s)[2][4], const QFrags<kD, kQInRegs>& qf, const T* q_s,
                                            const T* k_s) {
  constexpr int kLd = kD + 8;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int k_row = (lane & 7) + ((lane >> 4) << 3), k_col = ((lane >> 3) & 1) * 8;
  const int q_row = (lane & 7) + (((lane >> 3) & 1) << 3), q_col = (lane >> 4) * 8;
#pragma unroll
  for (int nt = 0; nt < 2; ++nt) s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.0f;
#pragma unroll
  for (int kk = 0; kk < kD / 16; ++kk) {
    uint32_t kb[4];
    LdMatrixX4(kb, k_s + k_row * kLd + kk * 16 + k_col);
    if constexpr (kQInRegs) {
      Mma16816<T>(s[0], qf[kk], kb[0], kb[1]);
      Mma16816<T>(s[1], qf[kk], kb[2], kb[3]);
    } else {
      uint32_t a[4];
      LdMatrixX4(a, q_s + q_row * kLd + kk * 16 + q_col);
      Mma16816<T>(s[0], a, kb[0], kb[1]);
      Mma16816<T>(s[1], a, kb[2], kb[3]);
    }
  }
}

// Folds the chunk's scores (log2 domain, masked) into the running softmax
// and returns the probabilities, rounded to T, as the A operand of P V.
template <typename T, int kD>
__device__ __forceinline__ void OnlineSoftmax(WarpSoftmax<kD>& w, const float (&s)[2][4], uint32_t (&pf)[4]) {
  float mx_lo = fmaxf(fmaxf(s[0][0], s[0][1]), fmaxf(s[1][0], s[1][1]));
  float mx_hi = fmaxf(fmaxf(s[0][2], s[0][3]), fmaxf(s[1][2], s[1][3]));
  mx_lo = fmaxf(mx_lo, __shfl_xor_sync(kFullMask, mx_lo, 1));
  mx_lo = fmaxf(mx_lo, __shfl_xor_sync(kFullMask, mx_lo, 2));
  mx_hi = fmaxf(mx_hi, __shfl_xor_sync(kFullMask, mx_hi, 1));
  mx_hi = fmaxf(mx_hi, __shfl_xor_sync(kFullMask, mx_hi, 2));
  const float mn_lo = fmaxf(w.m_lo, mx_lo), mn_hi = fmaxf(w.m_hi, mx_hi);
  const float mu_lo = mn_lo == -INFINITY ? 0.0f : mn_lo;  // rows that saw nothing yet
  const float mu_hi = mn_hi == -INFINITY ? 0.0f : mn_hi;
  const float alpha_lo = exp2f(w.m_lo - mu_lo), alpha_hi = exp2f(w.m_hi - mu_hi);
  w.m_lo = mn_lo;
  w.m_hi = mn_hi;
  if (__any_sync(kFullMask, alpha_lo != 1.0f || alpha_hi != 1.0f)) {  // skipped once the maxima settle
    w.l_lo *= alpha_lo;
    w.l_hi *= alpha_hi;
#pragma unroll
    for (int nt = 0; nt < kD / 8; ++nt) {
      w.o[nt][0] *= alpha_lo;
      w.o[nt][1] *= alpha_lo;
      w.o[nt][2] *= alpha_hi;
      w.o[nt][3] *= alpha_hi;
    }
  }
#pragma unroll
  for (int nt = 0; nt < 2; ++nt) {
    const T p0 = FromFloat<T>(exp2f(s[nt][0] - mu_lo)), p1 = FromFloat<T>(exp2f(s[nt][1] - mu_lo));
    const T p2 = FromFloat<T>(exp2f(s[nt][2] - mu_hi)), p3 = FromFloat<T>(exp2f(s[nt][3] - mu_hi));
    w.l_lo += ToFloat(p0) + ToFloat(p1);  // the weights P V uses, so they sum to l exactly
    w.l_hi += ToFloat(p2) + ToFloat(p3);
    pf[nt * 2] = PackPair(p0, p1);
    pf[nt * 2 + 1] = PackPair(p2, p3);
  }
}

// One chunk: scores, causal mask (only where a key can pass a row's
// position), softmax update, O += P V (ldmatrix.trans turns V rows into B
// fragments, two column tiles per load).
template <typename T, int kD, bool kQInRegs>
__device__ __forceinline__ void AttendChunk(WarpSoftmax<kD>& w, const QFrags<kD, kQInRegs>& qf, const T* q_s,
                                            const T* k_s, int k0, int pos_lo, int pos_hi, int pos_min,
                                            float scale_log2) {
  constexpr int kLd = kD + 8;
  const int lane = static_cast<int>(threadIdx.x) % 32, tq = lane % 4;
  float s[2][4];
  ChunkScores<T, kD, kQInRegs>(s, qf, q_s, k_s);
#pragma unroll
  for (int nt = 0; nt < 2; ++nt) {
#pragma unroll
    for (int j = 0; j < 4; ++j) s[nt][j] *= scale_log2;
  }
  if (k0 + kChunk - 1 > pos_min) {
#pragma unroll
    for (int nt = 0; nt < 2; ++nt) {
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        const int key = k0 + nt * 8 + 2 * tq + j;
        if (key > pos_lo) s[nt][j] = -INFINITY;
        if (key > pos_hi) s[nt][2 + j] = -INFINITY;
      }
    }
  }
  uint32_t pf[4];
  OnlineSoftmax<T, kD>(w, s, pf);
  const T* v_s = k_s + kChunk * kLd;
  const int v_row = (lane & 7) + ((lane >> 3) & 1) * 8, v_col = (lane >> 4) * 8;
#pragma unroll
  for (int np = 0; np < kD / 16; ++np) {
    uint32_t vb[4];
    LdMatrixX4Trans(vb, v_s + v_row * kLd + np * 16 + v_col);
    Mma16816<T>(w.o[2 * np], pf, vb[0], vb[1]);
    Mma16816<T>(w.o[2 * np + 1], pf, vb[2], vb[3]);
  }
}

// A warp's pipeline over its n chunks c0, c0 + step, ...: kStages - 1 chunks
// in flight ahead of the one it computes on, the table entries of the next
// one to issue loaded a step earlier. The query rows (LoadPackQueries) land
// with the first chunk; one block barrier then makes them visible to all.
template <typename T, int kD, int kStages, bool kQInRegs>
__device__ __forceinline__ void StreamWarpChunks(const AttnParams& p, const int32_t* table, const Pack& k, int g,
                                                 int c0, int step, int n, T* stages, const T* q_s,
                                                 WarpSoftmax<kD>& w) {
  constexpr int kStageElems = 2 * kChunk * (kD + 8);
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const T* k_cache = static_cast<const T*>(p.k_cache);
  const T* v_cache = static_cast<const T*>(p.v_cache);
  const int64_t kv_stride = static_cast<int64_t>(p.hk) * kD, head_off = static_cast<int64_t>(g) * kD;
  const float scale_log2 = p.scale * kLog2e;
  const int pos_lo = PosOfRow(k, lane / 4), pos_hi = PosOfRow(k, lane / 4 + 8);
  int rows[kStages - 1];
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) rows[s] = s < n ? KeyRow(p, table, c0 + s * step, k.limit, lane) : -2;
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < n) IssueChunk<T, kD>(k_cache, v_cache, kv_stride, head_off, rows[s], stages + s * kStageElems);
    CpAsyncCommit();
  }
  int next = kStages - 1 < n ? KeyRow(p, table, c0 + (kStages - 1) * step, k.limit, lane) : -2;
  CpAsyncWait<kStages - 2>();  // the query rows (and chunk 0)
  __syncthreads();
  QFrags<kD, kQInRegs> qf;
  if constexpr (kQInRegs) {
    const int q_row = (lane & 7) + (((lane >> 3) & 1) << 3), q_col = (lane >> 4) * 8;
#pragma unroll
    for (int kk = 0; kk < kD / 16; ++kk) LdMatrixX4(qf[kk], q_s + q_row * (kD + 8) + kk * 16 + q_col);
  }
  for (int i = 0; i < n; ++i) {
    const int ahead = i + kStages - 1;
    if (ahead < n) IssueChunk<T, kD>(k_cache, v_cache, kv_stride, head_off, next, stages + (ahead % kStages) * kStageElems);
    CpAsyncCommit();
    next = ahead + 1 < n ? KeyRow(p, table, c0 + (ahead + 1) * step, k.limit, lane) : -2;
    CpAsyncWait<kStages - 1>();  // chunk i has landed for this lane ...
    __syncwarp();                // ... and for the whole warp
    AttendChunk<T, kD, kQInRegs>(w, qf, q_s, stages + (i % kStages) * kStageElems, (c0 + i * step) * kChunk,
                                 pos_lo, pos_hi, k.first_pos, scale_log2);
    __syncwarp();  // the stage is refilled next step
  }
}

// Leaves warp `warp`'s unnormalised output rows, maxima and sums in the
// merge area: [kWarps][16][kD] outputs, then [kWarps][16] (max, sum) pairs.
template <int kD, int kWarps>
__device__ __forceinline__ void StoreWarpState(WarpSoftmax<kD>& w, float* merge_s, int warp) {
  const int lane = static_cast<int>(threadIdx.x) % 32, gr = lane / 4, tq = lane % 4;
  w.l_lo += __shfl_xor_sync(kFullMask, w.l_lo, 1);
  w.l_lo += __shfl_xor_sync(kFullMask, w.l_lo, 2);
  w.l_hi += __shfl_xor_sync(kFullMask, w.l_hi, 1);
  w.l_hi += __shfl_xor_sync(kFullMask, w.l_hi, 2);
  float* mo = merge_s + warp * kMmaRows * kD;
#pragma unroll
  for (int nt = 0; nt < kD / 8; ++nt) {
    *reinterpret_cast<float2*>(mo + gr * kD + nt * 8 + 2 * tq) = make_float2(w.o[nt][0], w.o[nt][1]);
    *reinterpret_cast<float2*>(mo + (gr + 8) * kD + nt * 8 + 2 * tq) = make_float2(w.o[nt][2], w.o[nt][3]);
  }
  float* ml = merge_s + kWarps * kMmaRows * kD + warp * kMmaRows * 2;
  if (tq == 0) {
    ml[gr * 2] = w.m_lo;
    ml[gr * 2 + 1] = w.l_lo;
    ml[(gr + 8) * 2] = w.m_hi;
    ml[(gr + 8) * 2 + 1] = w.l_hi;
  }
}

template <typename T, int kD>
__device__ __forceinline__ void WriteOut(const AttnParams& p, const Pack& k, int r, int col, float num, float den) {
  const int64_t row = k.row0 + r / k.nh;
  if (row >= p.q_rows) return;
  T* out = static_cast<T*>(p.out);
  out[(row * p.hq + k.h0 + r % k.nh) * kD + col] = FromFloat<T>(den > 0.0f ? num * (1.0f / den) : 0.0f);
}

// Merges the warps; unsplit, writes the output, else this split's partial,
// and the last split of the (sequence, kv head) to arrive merges them all.
template <typename T, int kD, int kWarps>
__device__ void FinishBlock(const AttnParams& p, const SplitArgs& sa, const Pack& k, const float* merge_s,
                            int active, int split, int unit, int* last_s) {
  const int tid = static_cast<int>(threadIdx.x), threads = static_cast<int>(blockDim.x);
  const float* ml_s = merge_s + kWarps * kMmaRows * kD;
  const size_t slot = static_cast<size_t>(unit) * gridDim.x + split;
  const size_t slots = static_cast<size_t>(gridDim.x) * gridDim.y * gridDim.z;
  float* ws_o = active > 1 ? sa.partials + slot * kMmaRows * kD : nullptr;
  float* ws_ml = active > 1 ? sa.partials + slots * kMmaRows * kD + slot * kMmaRows * 2 : nullptr;
  for (int e = tid; e < k.rows * kD; e += threads) {
    const int r = e / kD, col = e % kD;
    float num, den, m;
    MergeSplitPartials<false>(merge_s + r * kD + col, ml_s + r * 2, kWarps, kMmaRows * kD, kMmaRows * 2, &num, &den, &m);
    if (active == 1) {
      WriteOut<T, kD>(p, k, r, col, num, den);
    } else {
      ws_o[r * kD + col] = num;
      if (col == 0) {
        ws_ml[r * 2] = m;
        ws_ml[r * 2 + 1] = den;
      }
    }
  }
  if (active == 1 || !ArriveLast(sa.counters, unit, active, last_s)) return;
  const float* first_o = sa.partials + static_cast<size_t>(unit) * gridDim.x * kMmaRows * kD;
  const float* first_ml = sa.partials + slots * kMmaRows * kD + static_cast<size_t>(unit) * gridDim.x * kMmaRows * 2;
  for (int e = tid; e < k.rows * kD; e += threads) {
    const int r = e / kD, col = e % kD;
    float num, den, m;
    MergeSplitPartials<true>(first_o + r * kD + col, first_ml + r * 2, active, kMmaRows * kD, kMmaRows * 2, &num, &den,
                        &m);
    WriteOut<T, kD>(p, k, r, col, num, den);
  }
}

// Grid (S, B, Hk * ceil(group / 16)), kWarps * 32 threads. A sequence of
// more than p.short_q_max rows (only when p.decode_all) runs pack by pack
// in split 0 alone.
template <typename T, int kD, int kWarps, int kStages>
__global__ void __launch_bounds__(kWarps * 32, (kD <= 128 ? 12 : 4) / kWarps) DecodeMmaKernel(AttnParams p, SplitArgs sa) {
  using L = DecodeMmaLayout<kD, kWarps, kStages>;
  constexpr bool kQInRegs = kD <= 64;
  extern __shared__ __align__(128) unsigned char mma_smem[];
  __shared__ int last_s;
  T* q_s = reinterpret_cast<T*>(mma_smem);
  T* stream_s = reinterpret_cast<T*>(mma_smem + L::kQBytes);
  float* merge_s = reinterpret_cast<float*>(mma_smem + L::kQBytes);  // over the stages, once they are done
  // q, the caches, the sequences' tables and the split workspace's counters
  // are written before this kernel; every block waits, even one that exits
  // at once (pdl_launch.cuh).
  PdlWait();
  PdlLaunchDependents();

  const int split = static_cast<int>(blockIdx.x);
  const int warp = static_cast<int>(threadIdx.x) / 32;
  const HeadGroup hg = HeadGroupOf(p, kMmaRows);
  const SeqView seq = SeqOf(p, static_cast<int>(blockIdx.y));
  const bool in_packs = seq.q_len > p.short_q_max;
  if (seq.q_len < 1 || (in_packs && !p.decode_all)) return;  // none, or the prefill kernel's
  const int unit = static_cast<int>(blockIdx.y * gridDim.z + blockIdx.z);
  for (int r0 = 0; r0 < seq.q_len; r0 += p.short_q_max) {
    const int qn = min(p.short_q_max, seq.q_len - r0);
    const Pack k{static_cast<int64_t>(seq.q_begin) + r0, qn * hg.nh, hg.nh, hg.h0, seq.ctx - seq.q_len + r0,
                 seq.ctx - seq.q_len + r0 + qn};
    // This split's chunks: an equal share (at least one chunk per warp).
    const int chunks = k.limit > 0 ? (k.limit + kChunk - 1) / kChunk : 0;
    const int want = in_packs ? 1 : static_cast<int>(gridDim.x);
    const int per = max((chunks + want - 1) / want, kWarps);
    const int active = chunks > 0 ? (chunks + per - 1) / per : 1;
    if (split >= active) return;
    const int c_begin = split * per, c_end = min(c_begin + per, chunks);

    LoadPackQueries<T, kD>(p, k, q_s);
    WarpSoftmax<kD> w;
    w.m_lo = w.m_hi = -INFINITY;
    w.l_lo = w.l_hi = 0.0f;
#pragma unroll
    for (int nt = 0; nt < kD / 8; ++nt) w.o[nt][0] = w.o[nt][1] = w.o[nt][2] = w.o[nt][3] = 0.0f;
    const int n_mine = c_end - c_begin > warp ? (c_end - c_begin - warp + kWarps - 1) / kWarps : 0;
    StreamWarpChunks<T, kD, kStages, kQInRegs>(p, seq.table, k, hg.g, c_begin + warp, kWarps, n_mine,
                                               stream_s + warp * kStages * L::kStageElems, q_s, w);
    CpAsyncWait<0>();
    __syncthreads();  // every warp is done with its stages: the merge area overlays them
    StoreWarpState<kD, kWarps>(w, merge_s, warp);
    __syncthreads();
    FinishBlock<T, kD, kWarps>(p, sa, k, merge_s, active, split, unit, &last_s);
    __syncthreads();  // the next pack rewrites q_s and the merge area
  }
}

template <typename T, int kD, int kWarps, int kStages>
absl::Status LaunchDecodeMmaWith(const AttnParams& p, int sms, cudaStream_t stream) {
  using L = DecodeMmaLayout<kD, kWarps, kStages>;
  auto kernel = DecodeMmaKernel<T, kD, kWarps, kStages>;
  SEAM_CUDA_RETURN_IF_ERROR(
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(L::kBytes)));
  // Blocks an SM holds at once (the same on every GPU of a process): asked once.
  static const int per_sm = [&] {
    int n = 0;
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kernel, kWarps * 32, L::kBytes) != cudaSuccess) {
      cudaGetLastError();
      return 1;
    }
    return std::max(n, 1);
  }();
  const int head_chunks = (p.group + kMmaRows - 1) / kMmaRows;
  const int64_t units = static_cast<int64_t>(p.num_seqs) * p.hk * head_chunks;
  const int64_t max_chunks = (static_cast<int64_t>(p.max_blocks) * p.block_size + kChunk - 1) / kChunk;
  // Each split takes at least one chunk per warp.
  int64_t splits = ChooseSplits(units, max_chunks, kWarps, static_cast<int64_t>(sms) * per_sm,
                                int64_t{kMmaRows} * (kD + 2), kMaxMmaSplits);
  const SplitArgs sa = SplitArgsFor(stream, &splits);
  const dim3 grid(static_cast<unsigned int>(splits), static_cast<unsigned int>(p.num_seqs),
                  static_cast<unsigned int>(p.hk * head_chunks));
  return LaunchEnrolled({grid, dim3(kWarps * 32), L::kBytes, stream}, kernel, p, sa);
}

// Head size 128 (the common one, measured on an H200 at 32 query / 8 kv
// heads, bench/results/2026-12-02-h200-decode-attention): fewer (sequence,
// kv head) blocks than SMs, latency-bound, take blocks of 8 warps with 2
// stages (one block per SM: batch 1 x 32k 46.6 against 58.4 us, batch 8 x
// 1024 16.3 against 17.1, batch 1 x 192 9.0 against 10.9); more take 4
// warps with 3 stages (two blocks per SM: batch 256 x 1024 277.7 against
// 309.3 us, batch 32 41.6 against 45.0).
template <typename T>
absl::Status LaunchDecodeMmaTyped(const AttnParams& p, int sms, cudaStream_t stream) {
  if (p.head_dim == 64) return LaunchDecodeMmaWith<T, 64, 4, 4>(p, sms, stream);
  if (p.head_dim == 256) return LaunchDecodeMmaWith<T, 256, 4, 2>(p, sms, stream);
  const int64_t units = static_cast<int64_t>(p.num_seqs) * p.hk * ((p.group + kMmaRows - 1) / kMmaRows);
  if (units < sms) return LaunchDecodeMmaWith<T, 128, 8, 2>(p, sms, stream);
  return LaunchDecodeMmaWith<T, 128, 4, 3>(p, sms, stream);
}

}  // namespace

bool DecodeMmaApplies(const AttnParams& p, DType dtype) {
  if (dtype != DType::kBF16 && dtype != DType::kF16) return false;
  if (p.head_dim != 64 && p.head_dim != 128 && p.head_dim != 256) return false;
  auto aligned = [](const void* ptr) { return reinterpret_cast<uintptr_t>(ptr) % 16 == 0; };
  if (!aligned(p.q) || !aligned(p.k_cache) || !aligned(p.v_cache)) return false;
  if (p.num_seqs > 65535 || static_cast<int64_t>(p.hk) * ((p.group + kMmaRows - 1) / kMmaRows) > 65535) return false;
  return static_cast<int64_t>(p.num_blocks) * p.block_size <= 0x7fffffff;  // 32-bit cache rows
}

int DecodeMmaShortRows(const AttnParams& p) { return kMmaRows / std::min(p.group, kMmaRows); }

template <typename T>
absl::Status LaunchDecodeMma(const AttnParams& p, cudaStream_t stream) {
  if constexpr (std::is_same_v<T, float>) {
    return absl::InternalError("LaunchDecodeMma: f32 has no tensor-core decode kernel");
  } else {
    int device = 0, sms = 0;
    SEAM_CUDA_RETURN_IF_ERROR(cudaGetDevice(&device));
    SEAM_CUDA_RETURN_IF_ERROR(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    return LaunchDecodeMmaTyped<T>(p, sms, stream);
  }
}

template absl::Status LaunchDecodeMma<float>(const AttnParams& p, cudaStream_t stream);
template absl::Status LaunchDecodeMma<__nv_bfloat16>(const AttnParams& p, cudaStream_t stream);
template absl::Status LaunchDecodeMma<__half>(const AttnParams& p, cudaStream_t stream);

}  // namespace seam::kernels::cuda::attn
