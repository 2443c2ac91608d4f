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
//   scores   S = Q K^T: each warp takes one m tile, a group of keys (all
//            32 with four m tiles, else 16) and a share of the 576 columns
//            (ScoreTiling; the softmax sums the shares), fp32 into shared
//            memory;
//   softmax  per row: scale, causal mask, running max and sum, the
//            probabilities rounded to bf16 into shared memory (the sum
//            taken over the rounded values, so P V divides by its own
//            weights' sum) and the factor rescaling the row's output;
//   P V      warp w owns output columns 64 w .. 64 w + 63 of every row and
//            accumulates them in registers.
// Long contexts split over blocks (grid y) with the split count chosen from
// shapes (split_workspace.cuh) so that even one sequence fills the GPU; each
// split leaves unnormalised partials in the stream's split workspace and a
// second small kernel (latent_merge.cu, a warp per pack row) merges them.
// Packs are numbered over the batch (grid x, a warp scan of query_start
// finds a block's sequence), heads over grid z. What the two kernels share
// (packs, shares, the partials' layout) is latent_pack.cuh.
#include <algorithm>
#include <cmath>

#include "latent_attention.cuh"
#include "latent_pack.cuh"
#include "mma_sync.cuh"
#include "split_workspace.cuh"

namespace seam::kernels::cuda::mla {
namespace {

using T = __nv_bfloat16;
using attn::ChooseSplits;
using attn::SplitArgs;
using attn::SplitArgsFor;

constexpr int kLd = kWidth + 8;  // row stride of q and key rows: conflict-free ldmatrix
constexpr int kWarps = 8, kThreads = kWarps * 32;
constexpr int kStages = 3;
constexpr int kSLd = kKeys + 4;  // fp32 score row stride
constexpr int kPLd = kKeys + 8;  // bf16 probability row stride
constexpr int kColsPerWarp = kDc / kWarps;
constexpr float kLog2e = 1.4426950408889634f;

// How the 8 warps share S = Q K^T of a chunk: kMt m tiles x kGroups key
// groups (32 / kGroups keys each) x kShares shares of the 576 columns, the
// shares summed by the softmax. Four m tiles take all 32 keys per warp (A
// loaded once per two B pairs: 25% less shared-memory traffic than two key
// groups, which by estimate bounds this phase); fewer m tiles need the key
// groups to keep a whole number of k steps per share.
template <int kMt>
struct ScoreTiling {
  static constexpr int kGroups = kMt == 4 ? 1 : 2;
  static constexpr int kShares = kWarps / (kMt * kGroups);
  static constexpr int kPairs = 2 / kGroups;  // 16-key B pairs per warp
  static constexpr int kSteps = kWidth / 16 / kShares;
  static_assert(kMt * kGroups * kShares == kWarps && kSteps * kShares * 16 == kWidth, "whole k steps per share");
};

template <int kMt>
struct Layout {
  static constexpr size_t kQBytes = size_t{kMt} * 16 * kLd * 2;
  static constexpr size_t kStageBytes = size_t{kKeys} * kLd * 2;
  static constexpr size_t kScoreBytes = size_t{ScoreTiling<kMt>::kShares} * kMt * 16 * kSLd * 4;
  static constexpr size_t kPBytes = size_t{kMt} * 16 * kPLd * 2;
  static constexpr size_t kStatBytes = size_t{kMt} * 16 * 3 * 4;  // max, sum, rescale factor per row
  static constexpr size_t kBytes = kQBytes + kStages * kStageBytes + kScoreBytes + kPBytes + kStatBytes;
  static_assert(kBytes <= 227 * 1024, "fits the shared memory of one sm_90 block");
};

// Copies chunk c's 32 key rows into a stage (positions at or past the
// pack's limit, and blocks outside the cache, become zero rows). Lane t of
// every warp reads key t's block table entry once, and the 9 copies of each
// thread take their rows from it by shuffle: no table read waits behind the
// previous copy (a cp.async is a compiler memory barrier).
__device__ __forceinline__ void IssueChunk(const LatentParams& p, const int32_t* table, const Pack& k, int c,
                                           T* stage) {
  constexpr int kSegs = kWidth / 8;
  static_assert(kKeys == 32, "one key per lane");
  static_assert(kKeys * kSegs % kThreads == 0, "every lane of a warp copies as often");
  const T* cache = static_cast<const T*>(p.cache);
  const int lane = static_cast<int>(threadIdx.x) % 32, lane_pos = c * kKeys + lane;
  const int lane_row = lane_pos < k.limit ? LatentRowOf(p, table, lane_pos) : -1;
#pragma unroll
  for (int j = 0; j < kKeys * kSegs / kThreads; ++j) {
    const int e = static_cast<int>(threadIdx.x) + j * kThreads, t = e / kSegs, seg = e % kSegs;
    const int row = __shfl_sync(kFullMask, lane_row, t);
    mma::CpAsync16(stage + t * kLd + seg * 8, cache + (row >= 0 ? static_cast<int64_t>(row) * kWidth + seg * 8 : 0),
                   row >= 0);
  }
}

// Phase 1: this warp's share of S = Q K^T into score_s (ScoreTiling).
// With one B pair per warp, even and odd k steps accumulate apart (four
// independent mma chains per warp, as with two pairs), summed at the end.
template <int kMt>
__device__ __forceinline__ void Scores(const T* q_s, const T* k_s, float* score_s, int warp, int lane) {
  using St = ScoreTiling<kMt>;
  constexpr int kPar = St::kPairs == 1 ? 2 : 1, kNt = 2 * St::kPairs;
  const int tile = warp % (kMt * St::kGroups), share = warp / (kMt * St::kGroups);
  const int mt = tile / St::kGroups, n0 = (tile % St::kGroups) * (kKeys / St::kGroups);
  float s[kPar][kNt][4] = {};
  auto step = [&](int kk, float (&acc)[kNt][4]) {
    uint32_t a[4];
    mma::LoadA(a, q_s, kLd, mt * 16, kk * 16, lane);
#pragma unroll
    for (int pair = 0; pair < St::kPairs; ++pair) {
      uint32_t b[4];
      mma::LoadBPairNk(b, k_s, kLd, n0 + pair * 16, kk * 16, lane);
      mma::Mma16816<T>(acc[2 * pair], a, b[0], b[1]);
      mma::Mma16816<T>(acc[2 * pair + 1], a, b[2], b[3]);
    }
  };
  const int k0 = share * St::kSteps;
#pragma unroll 2
  for (int j = 0; j + kPar <= St::kSteps; j += kPar) {
#pragma unroll
    for (int q = 0; q < kPar; ++q) step(k0 + j + q, s[q]);
  }
  if constexpr (St::kSteps % kPar != 0) step(k0 + St::kSteps - 1, s[0]);
  const int gr = lane / 4, tq = lane % 4;
  float* out = score_s + (share * kMt * 16 + mt * 16) * kSLd;
#pragma unroll
  for (int nt = 0; nt < kNt; ++nt) {
    float v[4] = {s[0][nt][0], s[0][nt][1], s[0][nt][2], s[0][nt][3]};
#pragma unroll
    for (int q = 1; q < kPar; ++q) {
#pragma unroll
      for (int e = 0; e < 4; ++e) v[e] += s[q][nt][e];
    }
    const int key = n0 + nt * 8 + 2 * tq;
    *reinterpret_cast<float2*>(out + gr * kSLd + key) = make_float2(v[0], v[1]);
    *reinterpret_cast<float2*>(out + (gr + 8) * kSLd + key) = make_float2(v[2], v[3]);
  }
}

// Phase 2: the online softmax of one chunk; kThreads / (16 kMt) threads per
// row, each over kKeys / that many keys.
template <int kMt>
__device__ __forceinline__ void Softmax(const Pack& k, const float* score_s, T* p_s, float* stat_s, int key0,
                                        float scale_log2) {
  constexpr int kR = kMt * 16, kPerRow = kThreads / kR, kPerThread = kKeys / kPerRow,
                kShares = ScoreTiling<kMt>::kShares;
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
// slot, for the merge (latent_merge.cu).
template <int kMt>
__device__ __forceinline__ void FinishPack(const LatentParams& p, const SplitArgs& sa, const Pack& k,
                                           const float* stat, const float (&o)[kMt][kColsPerWarp / 8][4],
                                           int active) {
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
  const size_t unit = static_cast<size_t>(blockIdx.x) * gridDim.z + blockIdx.z;
  const size_t slots = static_cast<size_t>(gridDim.x) * gridDim.y * gridDim.z;
  const Partials<kMt> ws(sa.partials, unit, static_cast<int>(gridDim.y), static_cast<int>(blockIdx.y), slots);
#pragma unroll
  for (int mt = 0; mt < kMt; ++mt) {
    const int m_lo = mt * 16 + gr, m_hi = m_lo + 8;
#pragma unroll
    for (int nt = 0; nt < kColsPerWarp / 8; ++nt) {
      const int col = c0 + nt * 8 + 2 * tq;
      *reinterpret_cast<float2*>(ws.o + m_lo * kDc + col) = make_float2(o[mt][nt][0], o[mt][nt][1]);
      *reinterpret_cast<float2*>(ws.o + m_hi * kDc + col) = make_float2(o[mt][nt][2], o[mt][nt][3]);
    }
  }
  for (int m = tid; m < kR; m += kThreads) {
    ws.ml[m * 2] = max_s[m];
    ws.ml[m * 2 + 1] = sum_s[m];
  }
}

// Grid (packs, splits, head chunks), kThreads threads.
template <int kMt>
__global__ void __launch_bounds__(kThreads, 1) LatentMmaKernel(LatentParams p, int nh, int qpp, SplitArgs sa) {
  extern __shared__ __align__(128) unsigned char mla_smem[];
  __shared__ int seq_s, pack_s;
  if (threadIdx.x < 32) FindPack(p, qpp, static_cast<int>(blockIdx.x), &seq_s, &pack_s);
  __syncthreads();
  if (seq_s < 0) return;  // past the batch's last pack
  const Pack k = PackOf(p, seq_s, pack_s * qpp, nh, qpp, static_cast<int>(blockIdx.z));
  const Share sh = ShareOf(k, static_cast<int>(gridDim.y));
  const int split = static_cast<int>(blockIdx.y);
  if (split >= sh.active) return;
  const int c_begin = split * sh.per, n = max(0, min(c_begin + sh.per, sh.chunks) - c_begin);
  const Smem<kMt> sm = CarveSmem<kMt>(mla_smem);
  float o[kMt][kColsPerWarp / 8][4];
#pragma unroll
  for (int mt = 0; mt < kMt; ++mt) {
#pragma unroll
    for (int nt = 0; nt < kColsPerWarp / 8; ++nt) o[mt][nt][0] = o[mt][nt][1] = o[mt][nt][2] = o[mt][nt][3] = 0.0f;
  }
  StreamChunks<kMt>(p, p.block_tables + static_cast<int64_t>(seq_s) * p.max_blocks, k, c_begin, n, sm, o);
  FinishPack<kMt>(p, sa, k, sm.stat, o, sh.active);
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
  // Splits from shapes only: enough blocks to fill the GPU's block slots,
  // each streaming at least kMinChunks of the longest context the table holds
  // (the device divides each pack's actual context equally), within the
  // workspace.
  int64_t splits = ChooseSplits(units, max_chunks, kMinChunks, static_cast<int64_t>(sms) * per_sm,
                                int64_t{kMt} * 16 * (kDc + 2), kMaxSplits);
  const SplitArgs sa = SplitArgsFor(stream, &splits);
  const dim3 grid(static_cast<unsigned int>(packs), static_cast<unsigned int>(splits),
                  static_cast<unsigned int>(head_chunks));
  kernel<<<grid, kThreads, L::kBytes, stream>>>(p, nh, qpp, sa);
  SEAM_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  if (splits <= 1) return absl::OkStatus();
  return LaunchLatentMerge(p, SplitGrid{kMt, nh, qpp, packs, head_chunks, static_cast<int>(splits), sa.partials, sms},
                           stream);
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
