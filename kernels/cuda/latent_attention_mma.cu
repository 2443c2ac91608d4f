// Latent attention on tensor cores (bf16 q and cache, Dc 512, Dr 64): every
// head reads the same cache row per token, so one thread block loads each
// row of its share of the context once and serves up to 64 (query row,
// head) pairs with it, as four m16 tiles of mma.sync m16n8k16 (fp32
// accumulators).
//
// A block serves one pack: up to 64 rows, row m = query row r0 + m / nh of a
// sequence for head h0 + m % nh (a decode step of 64 heads fills one pack
// with one query row; 16 heads pack 4 query rows of a chunk, one head 64).
// It streams its keys in chunks of 32 through a ring of kStages cp.async
// stages (rows gathered through the block table; the next chunks in flight
// while one is computed), and per chunk runs three phases between block
// barriers:
//   scores   S = Q K^T: warp w takes m tile (w % 2 MT) / 2, keys
//            16 ((w % 2 MT) % 2) .. + 15 and a share of the 576 columns
//            (with fewer than 4 m tiles the columns split over warps and
//            the softmax sums the shares), fp32 into shared memory;
//   softmax  per row: scale, causal mask, running max and sum, the
//            probabilities rounded to bf16 into shared memory (the sum
//            taken over the rounded values, so P V divides by its own
//            weights' sum) and the factor rescaling the row's output;
//   P V      warp w owns output columns 64 w .. 64 w + 63 of every row and
//            accumulates them in registers.
// Long contexts split over blocks (grid y) with the split count chosen from
// shapes (split_workspace.cuh); the last split of a pack to finish merges the
// partials. Packs are numbered over the batch (grid x, a warp scan of
// query_start finds a block's sequence), heads over grid z.
#include <algorithm>
#include <cmath>

#include "latent_attention.cuh"
#include "mma_sync.cuh"
#include "split_workspace.cuh"

namespace seam::kernels::cuda::mla {
namespace {

using T = __nv_bfloat16;
using attn::ArriveLast;
using attn::ChooseSplits;
using attn::SplitArgs;
using attn::SplitArgsFor;

constexpr int kDc = 512, kDr = 64, kWidth = kDc + kDr;
constexpr int kLd = kWidth + 8;  // row stride of q and key rows: conflict-free ldmatrix
constexpr int kKeys = 32;        // keys per chunk
constexpr int kWarps = 8, kThreads = kWarps * 32;
constexpr int kStages = 3;
constexpr int kRows = 64;        // rows of a full pack (4 m tiles)
constexpr int kSLd = kKeys + 4;  // fp32 score row stride
constexpr int kPLd = kKeys + 8;  // bf16 probability row stride
constexpr int kColsPerWarp = kDc / kWarps;
constexpr int kMinChunks = 4;    // a split streams at least this many chunks
constexpr int kMaxSplits = 256;
static_assert(size_t{kRows} * kMaxSplits * sizeof(float) <= size_t{kStages} * kKeys * kLd * 2,
              "the merge's weights fit in the cp.async stages");
constexpr float kLog2e = 1.4426950408889634f;
constexpr unsigned kFullMask = 0xffffffffu;

template <int kMt>
struct Layout {
  static constexpr size_t kQBytes = size_t{kMt} * 16 * kLd * 2;
  static constexpr size_t kStageBytes = size_t{kKeys} * kLd * 2;
  static constexpr size_t kScoreBytes = size_t{kRows} * kSLd * 4;  // kMt m tiles x (4 / kMt) column shares
  static constexpr size_t kPBytes = size_t{kMt} * 16 * kPLd * 2;
  static constexpr size_t kStatBytes = size_t{kMt} * 16 * 3 * 4;  // max, sum, rescale factor per row
  static constexpr size_t kBytes = kQBytes + kStages * kStageBytes + kScoreBytes + kPBytes + kStatBytes;
};

// What a block runs: its pack's rows and the positions they sit at.
struct Pack {
  int64_t row0;    // global query row of pack row 0
  int rows;        // valid query rows (qn) of the pack
  int nh;          // heads per query row in a pack
  int heads;       // heads of this head chunk (<= nh)
  int h0;
  int first_pos;   // position of the pack's first query row
  int limit;       // keys the last row sees
};

__device__ __forceinline__ bool RowValid(const Pack& k, int m) { return m / k.nh < k.rows && m % k.nh < k.heads; }
__device__ __forceinline__ int PosOf(const Pack& k, int m) { return k.first_pos + min(m / k.nh, k.rows - 1); }

// Finds the (sequence, pack) of pack number j, packs numbered sequence by
// sequence with ceil(q_len / qpp) each, into *seq (-1 past the last pack)
// and *pack (shared memory); warp-wide.
__device__ void FindPack(const LatentParams& p, int qpp, int j, int* seq, int* pack) {
  const int lane = static_cast<int>(threadIdx.x) % 32;
  int base = 0;
  if (lane == 0) *seq = -1;
  __syncwarp();
  for (int b0 = 0; b0 < p.num_seqs; b0 += 32) {
    const int b = b0 + lane;
    const int q_len = b < p.num_seqs ? p.query_start[b + 1] - p.query_start[b] : 0;
    const int packs = q_len > 0 ? (q_len + qpp - 1) / qpp : 0;
    int incl = packs;
#pragma unroll
    for (int offset = 1; offset < 32; offset <<= 1) {
      const int up = __shfl_up_sync(kFullMask, incl, offset);
      if (lane >= offset) incl += up;
    }
    const int excl = incl - packs;
    if (packs > 0 && j >= base + excl && j < base + incl) {
      *seq = b;
      *pack = j - base - excl;
    }
    base += __shfl_sync(kFullMask, incl, 31);
    if (base > j) break;
  }
}

// Copies chunk c's 32 key rows into a stage (positions at or past the
// pack's limit, and blocks outside the cache, become zero rows).
__device__ __forceinline__ void IssueChunk(const LatentParams& p, const int32_t* table, const Pack& k, int c,
                                           T* stage) {
  constexpr int kSegs = kWidth / 8;
  const T* cache = static_cast<const T*>(p.cache);
  for (int e = static_cast<int>(threadIdx.x); e < kKeys * kSegs; e += kThreads) {
    const int t = e / kSegs, seg = e % kSegs, pos = c * kKeys + t;
    const int row = pos < k.limit ? LatentRowOf(p, table, pos) : -1;
    mma::CpAsync16(stage + t * kLd + seg * 8, cache + (row >= 0 ? static_cast<int64_t>(row) * kWidth + seg * 8 : 0),
                   row >= 0);
  }
}

// Phase 1: this warp's share of S = Q K^T into score_s.
template <int kMt>
__device__ __forceinline__ void Scores(const T* q_s, const T* k_s, float* score_s, int warp, int lane) {
  constexpr int kTiles = 2 * kMt, kShares = kWarps / kTiles, kSteps = kWidth / 16 / kShares;
  const int tile = warp % kTiles, share = warp / kTiles, mt = tile / 2, n0 = (tile % 2) * 16;
  float s[2][4] = {{0, 0, 0, 0}, {0, 0, 0, 0}};
#pragma unroll 4
  for (int kk = share * kSteps; kk < (share + 1) * kSteps; ++kk) {
    uint32_t a[4], b[4];
    mma::LoadA(a, q_s, kLd, mt * 16, kk * 16, lane);
    mma::LoadBPairNk(b, k_s, kLd, n0, kk * 16, lane);
    mma::Mma16816<T>(s[0], a, b[0], b[1]);
    mma::Mma16816<T>(s[1], a, b[2], b[3]);
  }
  const int gr = lane / 4, tq = lane % 4;
  float* out = score_s + (share * kMt * 16 + mt * 16) * kSLd;
#pragma unroll
  for (int nt = 0; nt < 2; ++nt) {
    const int key = n0 + nt * 8 + 2 * tq;
    *reinterpret_cast<float2*>(out + gr * kSLd + key) = make_float2(s[nt][0], s[nt][1]);
    *reinterpret_cast<float2*>(out + (gr + 8) * kSLd + key) = make_float2(s[nt][2], s[nt][3]);
  }
}

// Phase 2: the online softmax of one chunk; kThreads / (16 kMt) threads per
// row, each over kKeys / that many keys.
template <int kMt>
__device__ __forceinline__ void Softmax(const Pack& k, const float* score_s, T* p_s, float* stat_s, int key0,
                                        float scale_log2) {
  constexpr int kR = kMt * 16, kPerRow = kThreads / kR, kPerThread = kKeys / kPerRow, kShares = 4 / kMt;
  const int tid = static_cast<int>(threadIdx.x), m = tid / kPerRow, sub = tid % kPerRow;
  float* max_s = stat_s;
  float* sum_s = stat_s + kR;
  float* alpha_s = stat_s + 2 * kR;
  const float m_old = max_s[m], l_old = sum_s[m];
  const int pos = PosOf(k, m);
  float s[kPerThread];
  float mx = -INFINITY;
#pragma unroll
  for (int j = 0; j < kPerThread; ++j) {
    const int key = sub * kPerThread + j;
    float v = 0.0f;
#pragma unroll
    for (int sh = 0; sh < kShares; ++sh) v += score_s[(sh * kR + m) * kSLd + key];
    s[j] = key0 + key <= pos ? v * scale_log2 : -INFINITY;
    mx = fmaxf(mx, s[j]);
  }
#pragma unroll
  for (int offset = 1; offset < kPerRow; offset <<= 1) mx = fmaxf(mx, __shfl_xor_sync(kFullMask, mx, offset));
  const float m_new = fmaxf(m_old, mx);
  const float m_use = m_new == -INFINITY ? 0.0f : m_new;  // a row that has seen nothing yet
  float sum = 0.0f;
#pragma unroll
  for (int j = 0; j < kPerThread; ++j) {
    const T pj = __float2bfloat16_rn(exp2f(s[j] - m_use));
    sum += __bfloat162float(pj);
    p_s[m * kPLd + sub * kPerThread + j] = pj;
  }
#pragma unroll
  for (int offset = 1; offset < kPerRow; offset <<= 1) sum += __shfl_xor_sync(kFullMask, sum, offset);
  __syncwarp();  // every lane of the row has read the old max and sum
  if (sub == 0) {
    const float alpha = exp2f(m_old - m_use);
    max_s[m] = m_new;
    sum_s[m] = l_old * alpha + sum;
    alpha_s[m] = alpha;
  }
}

// Phase 3: O = alpha O + P V over this warp's 64 output columns.
template <int kMt>
__device__ __forceinline__ void AccumulatePv(float (&o)[kMt][kColsPerWarp / 8][4], const T* p_s, const T* v_s,
                                             const float* alpha_s, int warp, int lane) {
  const int gr = lane / 4, c0 = warp * kColsPerWarp;
#pragma unroll
  for (int mt = 0; mt < kMt; ++mt) {
    const float lo = alpha_s[mt * 16 + gr], hi = alpha_s[mt * 16 + gr + 8];
#pragma unroll
    for (int nt = 0; nt < kColsPerWarp / 8; ++nt) {
      o[mt][nt][0] *= lo;
      o[mt][nt][1] *= lo;
      o[mt][nt][2] *= hi;
      o[mt][nt][3] *= hi;
    }
  }
#pragma unroll
  for (int kk = 0; kk < kKeys / 16; ++kk) {
    uint32_t a[kMt][4];
#pragma unroll
    for (int mt = 0; mt < kMt; ++mt) mma::LoadA(a[mt], p_s, kPLd, mt * 16, kk * 16, lane);
#pragma unroll
    for (int np = 0; np < kColsPerWarp / 16; ++np) {
      uint32_t b[4];
      mma::LoadBPairKn(b, v_s, kLd, c0 + np * 16, kk * 16, lane);
#pragma unroll
      for (int mt = 0; mt < kMt; ++mt) {
        mma::Mma16816<T>(o[mt][2 * np], a[mt], b[0], b[1]);
        mma::Mma16816<T>(o[mt][2 * np + 1], a[mt], b[2], b[3]);
      }
    }
  }
}

__device__ __forceinline__ void StorePair(const LatentParams& p, const Pack& k, int m, int col, float x, float y) {
  if (!RowValid(k, m)) return;
  const int64_t row = k.row0 + m / k.nh;
  T* out = static_cast<T*>(p.out) + (row * p.hq + k.h0 + m % k.nh) * kDc + col;
  *reinterpret_cast<__nv_bfloat162*>(out) = __floats2bfloat162_rn(x, y);
}

template <int kMt>
struct Smem {
  T* q;        // [16 kMt][kLd]
  T* stages;   // kStages x [kKeys][kLd]
  float* score;
  T* p;        // [16 kMt][kPLd]
  float* stat;  // max [16 kMt], sum [16 kMt], rescale factor [16 kMt]
};

template <int kMt>
__device__ __forceinline__ Smem<kMt> CarveSmem(unsigned char* base) {
  using L = Layout<kMt>;
  Smem<kMt> s;
  s.q = reinterpret_cast<T*>(base);
  s.stages = reinterpret_cast<T*>(base + L::kQBytes);
  s.score = reinterpret_cast<float*>(base + L::kQBytes + kStages * L::kStageBytes);
  s.p = reinterpret_cast<T*>(base + L::kQBytes + kStages * L::kStageBytes + L::kScoreBytes);
  s.stat = reinterpret_cast<float*>(base + L::kQBytes + kStages * L::kStageBytes + L::kScoreBytes + L::kPBytes);
  return s;
}

// The pack of sequence b whose first query row is r0, for head chunk blockIdx.z.
__device__ __forceinline__ Pack PackOf(const LatentParams& p, int b, int r0, int nh, int qpp) {
  const int q_begin = p.query_start[b], q_len = p.query_start[b + 1] - q_begin;
  Pack k;
  k.row0 = static_cast<int64_t>(q_begin) + r0;
  k.rows = min(qpp, q_len - r0);
  k.nh = nh;
  k.h0 = static_cast<int>(blockIdx.z) * nh;
  k.heads = min(nh, p.hq - k.h0);
  k.first_pos = LatentContextOf(p, b) - q_len + r0;
  k.limit = k.first_pos + k.rows;
  return k;
}

// Streams chunks c_begin .. c_begin + n - 1 of the pack's keys into the
// output accumulators (the queries start copying first, landing with the
// first chunk); the statistics in shared memory are final on return.
template <int kMt>
__device__ __forceinline__ void StreamChunks(const LatentParams& p, const int32_t* table, const Pack& k,
                                             int c_begin, int n, const Smem<kMt>& sm,
                                             float (&o)[kMt][kColsPerWarp / 8][4]) {
  constexpr int kR = kMt * 16, kStageElems = kKeys * kLd;
  const int tid = static_cast<int>(threadIdx.x), warp = tid / 32, lane = tid % 32;
  const T* q = static_cast<const T*>(p.q);
  for (int e = tid; e < kR * (kWidth / 8); e += kThreads) {
    const int m = e / (kWidth / 8), seg = e % (kWidth / 8);
    const bool valid = RowValid(k, m);
    const int64_t at = valid ? ((k.row0 + m / k.nh) * p.hq + k.h0 + m % k.nh) * kWidth + seg * 8 : 0;
    mma::CpAsync16(sm.q + m * kLd + seg * 8, q + at, valid);
  }
  for (int m = tid; m < kR; m += kThreads) {
    sm.stat[m] = -INFINITY;
    sm.stat[kR + m] = 0.0f;
  }
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < n) IssueChunk(p, table, k, c_begin + s, sm.stages + s * kStageElems);
    mma::CpAsyncCommit();
  }
  const float scale_log2 = p.scale * kLog2e;
  for (int i = 0; i < n; ++i) {
    mma::CpAsyncWait<kStages - 2>();  // chunk i (and the queries) landed for this thread ...
    __syncthreads();                  // ... for every thread; every warp is done with chunk i - 1
    const int ahead = i + kStages - 1;
    if (ahead < n) IssueChunk(p, table, k, c_begin + ahead, sm.stages + (ahead % kStages) * kStageElems);
    mma::CpAsyncCommit();
    const T* k_s = sm.stages + (i % kStages) * kStageElems;
    Scores<kMt>(sm.q, k_s, sm.score, warp, lane);
    __syncthreads();
    Softmax<kMt>(k, sm.score, sm.p, sm.stat, (c_begin + i) * kKeys, scale_log2);
    __syncthreads();
    AccumulatePv<kMt>(o, sm.p, k_s, sm.stat + 2 * kR, warp, lane);
  }
  mma::CpAsyncWait<0>();
  __syncthreads();
}

// The pack's output: normalised and stored when its context is not split;
// else this split's unnormalised rows and (max, sum) go to its workspace
// slot, and the last split of the pack to arrive merges every slot.
template <int kMt>
__device__ __forceinline__ void FinishPack(const LatentParams& p, const SplitArgs& sa, const Pack& k,
                                           const float* stat, const float (&o)[kMt][kColsPerWarp / 8][4],
                                           int active, float* weights_s, int* last_s) {
  constexpr int kR = kMt * 16;
  const int tid = static_cast<int>(threadIdx.x), warp = tid / 32, lane = tid % 32;
  const int gr = lane / 4, tq = lane % 4, c0 = warp * kColsPerWarp;
  const float* max_s = stat;
  const float* sum_s = stat + kR;
  if (active == 1) {
#pragma unroll
    for (int mt = 0; mt < kMt; ++mt) {
      const int m_lo = mt * 16 + gr, m_hi = m_lo + 8;
      const float inv_lo = sum_s[m_lo] > 0.0f ? 1.0f / sum_s[m_lo] : 0.0f;
      const float inv_hi = sum_s[m_hi] > 0.0f ? 1.0f / sum_s[m_hi] : 0.0f;
#pragma unroll
      for (int nt = 0; nt < kColsPerWarp / 8; ++nt) {
        const int col = c0 + nt * 8 + 2 * tq;
        StorePair(p, k, m_lo, col, o[mt][nt][0] * inv_lo, o[mt][nt][1] * inv_lo);
        StorePair(p, k, m_hi, col, o[mt][nt][2] * inv_hi, o[mt][nt][3] * inv_hi);
      }
    }
    return;
  }
  const int unit = static_cast<int>(blockIdx.x * gridDim.z + blockIdx.z);
  const size_t slot = static_cast<size_t>(unit) * gridDim.y + blockIdx.y;
  const size_t slots = static_cast<size_t>(gridDim.x) * gridDim.y * gridDim.z;
  float* ws_o = sa.partials + slot * kRows * kDc;
  float* ws_ml = sa.partials + slots * kRows * kDc + slot * kRows * 2;
#pragma unroll
  for (int mt = 0; mt < kMt; ++mt) {
    const int m_lo = mt * 16 + gr, m_hi = m_lo + 8;
#pragma unroll
    for (int nt = 0; nt < kColsPerWarp / 8; ++nt) {
      const int col = c0 + nt * 8 + 2 * tq;
      *reinterpret_cast<float2*>(ws_o + m_lo * kDc + col) = make_float2(o[mt][nt][0], o[mt][nt][1]);
      *reinterpret_cast<float2*>(ws_o + m_hi * kDc + col) = make_float2(o[mt][nt][2], o[mt][nt][3]);
    }
  }
  for (int m = tid; m < kR; m += kThreads) {
    ws_ml[m * 2] = max_s[m];
    ws_ml[m * 2 + 1] = sum_s[m];
  }
  if (!ArriveLast(sa.counters, unit, active, last_s)) return;
  const float* first_o = sa.partials + static_cast<size_t>(unit) * gridDim.y * kRows * kDc;
  const float* first_ml = sa.partials + slots * kRows * kDc + static_cast<size_t>(unit) * gridDim.y * kRows * 2;
  // Each row's split weights 2^(m_i - M) / sum_i l_i 2^(m_i - M), once per
  // row into shared memory; then every output element sums its splits'
  // partials with them (coalesced, independent loads).
  for (int m = tid; m < kR; m += kThreads) {
    float m_max = -INFINITY;
    for (int i = 0; i < active; ++i) m_max = fmaxf(m_max, __ldcg(first_ml + i * kRows * 2 + m * 2));
    const float m_use = m_max == -INFINITY ? 0.0f : m_max;
    float den = 0.0f;
    for (int i = 0; i < active; ++i) {
      const float w = exp2f(__ldcg(first_ml + i * kRows * 2 + m * 2) - m_use);
      weights_s[m * active + i] = w;
      den += __ldcg(first_ml + i * kRows * 2 + m * 2 + 1) * w;
    }
    const float inv = den > 0.0f ? 1.0f / den : 0.0f;
    for (int i = 0; i < active; ++i) weights_s[m * active + i] *= inv;
  }
  __syncthreads();
  for (int e = tid; e < kR * kDc / 2; e += kThreads) {
    const int m = e / (kDc / 2), col = (e % (kDc / 2)) * 2;
    if (!RowValid(k, m)) continue;
    const float* w = weights_s + m * active;
    const float* src = first_o + m * kDc + col;
    float x = 0.0f, y = 0.0f;
#pragma unroll 4
    for (int i = 0; i < active; ++i) {
      const float2 v = __ldcg(reinterpret_cast<const float2*>(src + static_cast<size_t>(i) * kRows * kDc));
      x += v.x * w[i];
      y += v.y * w[i];
    }
    StorePair(p, k, m, col, x, y);
  }
}

// Grid (packs, splits, head chunks), kThreads threads.
template <int kMt>
__global__ void __launch_bounds__(kThreads, 1) LatentMmaKernel(LatentParams p, int nh, int qpp, SplitArgs sa) {
  extern __shared__ __align__(128) unsigned char mla_smem[];
  __shared__ int seq_s, pack_s, last_s;
  if (threadIdx.x < 32) FindPack(p, qpp, static_cast<int>(blockIdx.x), &seq_s, &pack_s);
  __syncthreads();
  if (seq_s < 0) return;  // past the batch's last pack
  const Pack k = PackOf(p, seq_s, pack_s * qpp, nh, qpp);
  // This split's chunks: an equal share of the pack's visible keys.
  const int chunks = k.limit > 0 ? (k.limit + kKeys - 1) / kKeys : 0;
  const int per = max((chunks + static_cast<int>(gridDim.y) - 1) / static_cast<int>(gridDim.y), kMinChunks);
  const int active = chunks > 0 ? (chunks + per - 1) / per : 1;
  const int split = static_cast<int>(blockIdx.y);
  if (split >= active) return;
  const int c_begin = split * per, n = max(0, min(c_begin + per, chunks) - c_begin);
  const Smem<kMt> sm = CarveSmem<kMt>(mla_smem);
  float o[kMt][kColsPerWarp / 8][4];
#pragma unroll
  for (int mt = 0; mt < kMt; ++mt) {
#pragma unroll
    for (int nt = 0; nt < kColsPerWarp / 8; ++nt) o[mt][nt][0] = o[mt][nt][1] = o[mt][nt][2] = o[mt][nt][3] = 0.0f;
  }
  StreamChunks<kMt>(p, p.block_tables + static_cast<int64_t>(seq_s) * p.max_blocks, k, c_begin, n, sm, o);
  // The merge's weights reuse the cp.async stages (idle once every chunk
  // landed): kRows x kMaxSplits floats fit in them.
  FinishPack<kMt>(p, sa, k, sm.stat, o, active, reinterpret_cast<float*>(sm.stages), &last_s);
}

template <int kMt>
absl::Status LaunchWith(const LatentParams& p, int sms, cudaStream_t stream) {
  using L = Layout<kMt>;
  auto kernel = LatentMmaKernel<kMt>;
  SEAM_CUDA_RETURN_IF_ERROR(
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(L::kBytes)));
  static const int per_sm = [&] {
    int blocks = 0;
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, kThreads, L::kBytes) != cudaSuccess) {
      cudaGetLastError();
      return 1;
    }
    return std::max(blocks, 1);
  }();
  const int nh = std::min(p.hq, kMt * 16);
  const int qpp = kMt * 16 / nh;  // query rows per pack
  const int64_t head_chunks = (p.hq + nh - 1) / nh;
  // Σ ceil(q_len / qpp) <= (T + B (qpp - 1)) / qpp: a bound on the packs.
  const int64_t packs = (p.q_rows + static_cast<int64_t>(p.num_seqs) * (qpp - 1)) / qpp;
  if (packs > 0x7fffffff) return absl::InvalidArgumentError("PagedLatentAttention: too many query rows");
  const int64_t units = packs * head_chunks;
  const int64_t max_chunks = (static_cast<int64_t>(p.max_blocks) * p.block_size + kKeys - 1) / kKeys;
  int64_t splits = ChooseSplits(units, max_chunks, kMinChunks, static_cast<int64_t>(sms) * per_sm,
                                int64_t{kRows} * (kDc + 2), kMaxSplits);
  const SplitArgs sa = SplitArgsFor(stream, &splits);
  const dim3 grid(static_cast<unsigned int>(packs), static_cast<unsigned int>(splits),
                  static_cast<unsigned int>(head_chunks));
  kernel<<<grid, kThreads, L::kBytes, stream>>>(p, nh, qpp, sa);
  SEAM_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return absl::OkStatus();
}

}  // namespace

bool LatentMmaApplies(const LatentParams& p) {
  if (p.width != kWidth || p.dc != kDc) return false;
  auto aligned = [](const void* ptr) { return reinterpret_cast<uintptr_t>(ptr) % 16 == 0; };
  return aligned(p.q) && aligned(p.cache) && aligned(p.out) &&
         static_cast<int64_t>(p.num_blocks) * p.block_size <= 0x7fffffff;
}

// Head tiles: a decode step packs min(Hq, 64) heads of one query row (one,
// two or four m tiles); any other batch takes full packs of 64 rows.
absl::Status LaunchLatentMma(const LatentParams& p, bool decode, cudaStream_t stream) {
  int device = 0, sms = 0;
  SEAM_CUDA_RETURN_IF_ERROR(cudaGetDevice(&device));
  SEAM_CUDA_RETURN_IF_ERROR(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  if (decode && p.hq <= 16) return LaunchWith<1>(p, sms, stream);
  if (decode && p.hq <= 32) return LaunchWith<2>(p, sms, stream);
  return LaunchWith<4>(p, sms, stream);
}

}  // namespace seam::kernels::cuda::mla
