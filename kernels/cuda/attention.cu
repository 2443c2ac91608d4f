// Paged KV-cache writes and causal grouped-query attention over the cache on
// CUDA, matching kernels/cpu/attention.cc (fp32 softmax with max subtraction,
// fp32 accumulation, one rounding of the output).
//
// Design. Every grid size depends on shapes only (T, B, heads, max_blocks, D),
// never on index values, and no launcher synchronises or allocates, so all of
// them can be captured in a CUDA graph. Index values the host cannot check
// without a sync are made harmless on the device: a slot past the cache is
// skipped, a block id outside the cache reads as a zero row, a context longer
// than the block table is cut to the table.
//
//  * WriteKvCache: one thread block per token row, 16-byte vectors, converting
//    between the k/v dtype and the cache dtype.
//  * Decode (T == B, i.e. one query row per sequence, since every sequence has
//    at least one row): one thread block per (sequence, kv head, group of up
//    to 8 query heads sharing it), so each K/V row is read once for the whole
//    group. The context streams through in tiles of 128 tokens: sub-warps of
//    lanes dot a 16-byte slice of a key with every head's query and reduce by
//    shuffles, one warp per head updates the online softmax, then every thread
//    accumulates a 16-byte slice of V for a subset of the tile's tokens.
//    When those blocks would leave most SMs idle (small batches), each one
//    becomes a cluster of up to 8 blocks splitting the context tiles, merged
//    by rank 0 through distributed shared memory (no workspace, one kernel).
//  * Prefill and chunked prefill (anything else): one thread block per (tile
//    of 64 query rows of one sequence, query head), streaming K/V tiles
//    through shared memory with an online softmax per row; key tiles entirely
//    in the causal future of the query tile are never loaded. Tiles are
//    numbered over all sequences; each block finds its (sequence, first row)
//    by a warp scan of query_start, and the grid is sized by the bound
//    ceil(T / 64) + B on the number of tiles (blocks past the end exit).
//    bf16/f16 with head_dim 64, 128 or 256 run both products on tensor cores
//    (WMMA, fp32 accumulation; the probabilities are rounded to bf16/f16 for
//    the P V product); every other case runs a kernel of fp32 FMAs.
#include <cooperative_groups.h>
#include <mma.h>

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "cuda_common.cuh"
#include "cuda_ops.h"

namespace seam::kernels::cuda {
namespace {

constexpr unsigned kFullMask = 0xffffffffu;
constexpr int kMaxHeadDim = 256;

__device__ __forceinline__ float WarpSum(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(kFullMask, v, offset);
  return v;
}

__device__ __forceinline__ float WarpMax(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v = fmaxf(v, __shfl_xor_sync(kFullMask, v, offset));
  return v;
}

// ---- KV cache writes --------------------------------------------------------------

// Block t copies row t of src into the cache row slots[t]; negative slots
// (padding) and slots past the cache are skipped.
template <typename TS, typename TD, int VEC>
__global__ void WriteCacheKernel(const TS* __restrict__ src, const int32_t* __restrict__ slots, TD* __restrict__ cache,
                                 int64_t num_slots, int row_elems) {
  const int64_t t = blockIdx.x;
  const int32_t slot = slots[t];
  if (slot < 0 || slot >= num_slots) return;
  const TS* in = src + t * row_elems;
  TD* dst = cache + static_cast<int64_t>(slot) * row_elems;
  for (int i = threadIdx.x * VEC; i < row_elems; i += blockDim.x * VEC) {
    float f[VEC];
    LoadFloats<TS, VEC>(in + i, f);
    StoreFloats<TD, VEC>(dst + i, f);
  }
}

template <typename TS, typename TD>
absl::Status LaunchWriteCache(const Tensor& src, const Tensor& slots, const Tensor& cache, cudaStream_t stream) {
  const int64_t rows = src.dim(0);
  const int row_elems = static_cast<int>(src.numel() / rows);
  const int64_t num_slots = cache.dim(0) * cache.dim(1);
  constexpr int kVec = VecWidth<TS, TD>();
  const bool vectorized =
      row_elems % kVec == 0 && VecAligned<TS>(src.raw_data(), kVec) && VecAligned<TD>(cache.raw_data(), kVec);
  const int vec = vectorized ? kVec : 1;
  const int vectors = row_elems / vec;
  const int threads = vectors >= 256 ? 256 : (vectors + 31) / 32 * 32;
  const auto* s = static_cast<const TS*>(src.raw_data());
  auto* d = static_cast<TD*>(cache.raw_data());
  const int32_t* sl = slots.data<int32_t>();
  const auto grid = static_cast<unsigned int>(rows);
  if (vectorized) {
    WriteCacheKernel<TS, TD, kVec><<<grid, threads, 0, stream>>>(s, sl, d, num_slots, row_elems);
  } else {
    WriteCacheKernel<TS, TD, 1><<<grid, threads, 0, stream>>>(s, sl, d, num_slots, row_elems);
  }
  SEAM_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return absl::OkStatus();
}

absl::Status WriteOne(const Tensor& src, const Tensor& slots, const Tensor& cache, cudaStream_t stream,
                      const char* src_name) {
  return DispatchFloat(src.dtype(), src_name, [&](auto s_tag) -> absl::Status {
    using TS = typename decltype(s_tag)::type;
    return DispatchFloat(cache.dtype(), "cache", [&](auto d_tag) -> absl::Status {
      using TD = typename decltype(d_tag)::type;
      return LaunchWriteCache<TS, TD>(src, slots, cache, stream);
    });
  });
}

// ---- attention: shared pieces -------------------------------------------------------

struct AttnParams {
  const void* q;        // [T, Hq, D]
  const void* k_cache;  // [num_blocks, block_size, Hk, D]
  const void* v_cache;
  void* out;  // [T, Hq, D]
  const int32_t* query_start;
  const int32_t* context_lens;
  const int32_t* block_tables;
  int64_t q_rows;
  int num_seqs;
  int max_blocks;
  int block_size;
  int num_blocks;
  int hq;
  int hk;
  int group;  // hq / hk
  int head_dim;
  float scale;
};

// Cache slot of position pos through a sequence's block table, or -1 when the
// table names a block outside the cache (read as a zero row).
__device__ __forceinline__ int64_t SlotOf(const int32_t* table, int pos, const AttnParams& p) {
  const int32_t block = table[pos / p.block_size];
  if (block < 0 || block >= p.num_blocks) return -1;
  return static_cast<int64_t>(block) * p.block_size + pos % p.block_size;
}

// Context length of sequence b, cut to what its block table row can hold.
__device__ __forceinline__ int ContextOf(const AttnParams& p, int b) {
  const int ctx = p.context_lens[b];
  const int cap = p.max_blocks * p.block_size;
  return ctx < cap ? ctx : cap;
}

// ---- decode --------------------------------------------------------------------------

constexpr int kDecodeThreads = 256;
constexpr int kDecodeWarps = kDecodeThreads / 32;
constexpr int kDecodeHeads = 8;  // query heads one decode block serves (≤ kDecodeWarps)
constexpr int kDecodeTile = 128;  // tokens staged per step (≤ kDecodeThreads)

// Grid (S, B, Hk * ceil(group / kDecodeHeads)). With kSplit the S blocks of a
// (sequence, head group) form one thread-block cluster: block r takes the
// context tiles r, r + S, ..., and rank 0 merges the S partial softmaxes
// through distributed shared memory, so no global workspace is needed.
// Written for one query row per sequence; a sequence with more rows is still
// right (rows run one after the other with their own causal limit), only slower.
template <typename T, int VEC, bool kSplit>
__global__ void __launch_bounds__(kDecodeThreads) DecodeKernel(AttnParams p) {
  __shared__ float q_s[kDecodeHeads][kMaxHeadDim];
  __shared__ float s_s[kDecodeHeads][kDecodeTile];  // scores, then probabilities
  __shared__ int64_t slot_s[kDecodeTile];
  __shared__ float m_s[kDecodeHeads];
  __shared__ float l_s[kDecodeHeads];
  __shared__ float alpha_s[kDecodeHeads];
  __shared__ float red_s[kDecodeThreads * VEC];  // partial outputs of the token lanes
  __shared__ float part_s[kSplit ? kDecodeHeads : 1][kSplit ? kMaxHeadDim : 1];  // this split's output

  const int split = blockIdx.x, splits = gridDim.x;
  const int b = blockIdx.y;
  const int chunks = (p.group + kDecodeHeads - 1) / kDecodeHeads;
  const int g = static_cast<int>(blockIdx.z) / chunks;
  const int chunk = static_cast<int>(blockIdx.z) % chunks;
  const int h0 = g * p.group + chunk * kDecodeHeads;
  const int rest = p.group - chunk * kDecodeHeads;
  const int nh = rest < kDecodeHeads ? rest : kDecodeHeads;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int d = p.head_dim, nv = d / VEC;
  const int q_begin = p.query_start[b];
  const int q_len = p.query_start[b + 1] - q_begin;
  const int ctx = ContextOf(p, b);
  const int32_t* table = p.block_tables + static_cast<int64_t>(b) * p.max_blocks;
  const T* q = static_cast<const T*>(p.q);
  const T* k_cache = static_cast<const T*>(p.k_cache);
  const T* v_cache = static_cast<const T*>(p.v_cache);
  T* out = static_cast<T*>(p.out);

  // Score phase: `lanes` lanes (a power of two ≤ 32) per key, each dotting
  // 16-byte slices. V phase: thread (tl, v) owns slice v for tokens tl, tl + tls, ...
  int lanes = 1;
  while (lanes < nv && lanes < 32) lanes <<= 1;
  const int keys_per_warp = 32 / lanes;
  const int sub = lane / lanes, sl = lane % lanes;
  const int tls = kDecodeThreads / nv;
  const int tl = tid / nv, vi = tid % nv;

  for (int i = 0; i < q_len; ++i) {
    const int64_t row = static_cast<int64_t>(q_begin) + i;
    if (row < 0 || row >= p.q_rows) break;
    const int visible = ctx - q_len + i + 1;  // positions 0 .. own position
    for (int e = tid; e < nh * d; e += kDecodeThreads) {
      q_s[e / d][e % d] = ToFloat(q[(row * p.hq + h0 + e / d) * d + e % d]);
    }
    if (tid < kDecodeHeads) {
      m_s[tid] = -INFINITY;
      l_s[tid] = 0.0f;
    }
    float acc[kDecodeHeads][VEC];
#pragma unroll
    for (int h = 0; h < kDecodeHeads; ++h) {
#pragma unroll
      for (int j = 0; j < VEC; ++j) acc[h][j] = 0.0f;
    }
    __syncthreads();

    for (int t0 = split * kDecodeTile; t0 < visible; t0 += splits * kDecodeTile) {
      const int n = visible - t0 < kDecodeTile ? visible - t0 : kDecodeTile;
      if (tid < n) slot_s[tid] = SlotOf(table, t0 + tid, p);
      __syncthreads();

      // Scores s = q . k * scale for every head of the block.
      for (int base = warp * keys_per_warp; base < n; base += kDecodeWarps * keys_per_warp) {
        const int t = base + sub;
        float dot[kDecodeHeads];
#pragma unroll
        for (int h = 0; h < kDecodeHeads; ++h) dot[h] = 0.0f;
        if (t < n && slot_s[t] >= 0) {
          const T* krow = k_cache + (slot_s[t] * p.hk + g) * d;
          for (int v = sl; v < nv; v += lanes) {
            float k[VEC];
            LoadFloats<T, VEC>(krow + v * VEC, k);
#pragma unroll
            for (int h = 0; h < kDecodeHeads; ++h) {
              if (h < nh) {
#pragma unroll
                for (int j = 0; j < VEC; ++j) dot[h] += q_s[h][v * VEC + j] * k[j];
              }
            }
          }
        }
#pragma unroll
        for (int h = 0; h < kDecodeHeads; ++h) {
          if (h < nh) {
            for (int offset = lanes / 2; offset > 0; offset >>= 1) {
              dot[h] += __shfl_xor_sync(kFullMask, dot[h], offset);
            }
            if (t < n && sl == 0) s_s[h][t] = dot[h] * p.scale;
          }
        }
      }
      __syncthreads();

      // Online softmax, one warp per head.
      if (warp < nh) {
        const int h = warp;
        float mx = -INFINITY;
        for (int t = lane; t < n; t += 32) mx = fmaxf(mx, s_s[h][t]);
        mx = WarpMax(mx);
        const float m_old = m_s[h];
        const float m_new = fmaxf(m_old, mx);
        float sum = 0.0f;
        for (int t = lane; t < n; t += 32) {
          const float e = expf(s_s[h][t] - m_new);
          s_s[h][t] = e;
          sum += e;
        }
        sum = WarpSum(sum);
        if (lane == 0) {
          const float alpha = expf(m_old - m_new);  // 0 on the first tile
          alpha_s[h] = alpha;
          l_s[h] = l_s[h] * alpha + sum;
          m_s[h] = m_new;
        }
      }
      __syncthreads();

      // acc = acc * alpha + sum_t p_t * v_t.
      if (tl < tls) {
#pragma unroll
        for (int h = 0; h < kDecodeHeads; ++h) {
          const float alpha = h < nh ? alpha_s[h] : 0.0f;
#pragma unroll
          for (int j = 0; j < VEC; ++j) acc[h][j] *= alpha;
        }
        for (int t = tl; t < n; t += tls) {
          const int64_t slot = slot_s[t];
          if (slot < 0) continue;
          float v[VEC];
          LoadFloats<T, VEC>(v_cache + (slot * p.hk + g) * d + vi * VEC, v);
#pragma unroll
          for (int h = 0; h < kDecodeHeads; ++h) {
            if (h < nh) {
              const float pr = s_s[h][t];
#pragma unroll
              for (int j = 0; j < VEC; ++j) acc[h][j] += pr * v[j];
            }
          }
        }
      }
      __syncthreads();
    }

    // Sum the token lanes' partial outputs, one head at a time, and
    // normalise (or keep the unnormalised sums for the merge of the splits).
#pragma unroll
    for (int h = 0; h < kDecodeHeads; ++h) {
      if (h < nh) {
        if (tl < tls) {
#pragma unroll
          for (int j = 0; j < VEC; ++j) red_s[tl * d + vi * VEC + j] = acc[h][j];
        }
        __syncthreads();
        const float l = l_s[h];
        const float inv = l > 0.0f ? 1.0f / l : 0.0f;
        for (int e = tid; e < d; e += kDecodeThreads) {
          float s = 0.0f;
          for (int k = 0; k < tls; ++k) s += red_s[k * d + e];
          if constexpr (kSplit) {
            part_s[h][e] = s;
          } else {
            out[(row * p.hq + h0 + h) * d + e] = FromFloat<T>(s * inv);
          }
        }
        __syncthreads();
      }
    }
    if constexpr (kSplit) {
      // Rank 0 merges: out = sum_r o_r e^(m_r - M) / sum_r l_r e^(m_r - M).
      // A split that saw no tokens has m = -inf, l = 0, o = 0 and adds nothing.
      namespace cg = cooperative_groups;
      cg::cluster_group cluster = cg::this_cluster();
      cluster.sync();  // every split's m_s, l_s, part_s are final
      if (cluster.block_rank() == 0) {
        for (int e = tid; e < nh * d; e += kDecodeThreads) {
          const int h = e / d, c = e % d;
          float m_max = -INFINITY;
          for (int r = 0; r < splits; ++r) m_max = fmaxf(m_max, cluster.map_shared_rank(&m_s[0], r)[h]);
          const float m_use = m_max == -INFINITY ? 0.0f : m_max;
          float num = 0.0f, den = 0.0f;
          for (int r = 0; r < splits; ++r) {
            const float weight = expf(cluster.map_shared_rank(&m_s[0], r)[h] - m_use);
            num += cluster.map_shared_rank(&part_s[0][0], r)[h * kMaxHeadDim + c] * weight;
            den += cluster.map_shared_rank(&l_s[0], r)[h] * weight;
          }
          out[(row * p.hq + h0 + h) * d + c] = FromFloat<T>(den > 0.0f ? num * (1.0f / den) : 0.0f);
        }
      }
      cluster.sync();  // rank 0 is done reading the others' shared memory
    }
  }
}

constexpr int kMaxSplits = 8;  // the portable cluster size

template <typename T, int VEC>
absl::Status LaunchDecodeWith(const AttnParams& p, int splits, cudaStream_t stream) {
  const int chunks = (p.group + kDecodeHeads - 1) / kDecodeHeads;
  const dim3 grid(static_cast<unsigned int>(splits), static_cast<unsigned int>(p.num_seqs),
                  static_cast<unsigned int>(p.hk * chunks));
  if (splits == 1) {
    DecodeKernel<T, VEC, false><<<grid, kDecodeThreads, 0, stream>>>(p);
    SEAM_CUDA_RETURN_IF_ERROR(cudaGetLastError());
    return absl::OkStatus();
  }
  cudaLaunchConfig_t config = {};
  config.gridDim = grid;
  config.blockDim = dim3(kDecodeThreads);
  config.dynamicSmemBytes = 0;
  config.stream = stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = static_cast<unsigned int>(splits);
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = 1;
  config.attrs = attr;
  config.numAttrs = 1;
  SEAM_CUDA_RETURN_IF_ERROR(cudaLaunchKernelEx(&config, DecodeKernel<T, VEC, true>, p));
  return absl::OkStatus();
}

// ---- decode, warp-parallel -------------------------------------------------------------

// The decode kernel for vectorised rows of at most 32 vectors (bf16/f16 up to
// head_dim 256, f32 up to 128). Grid (S, B, Hk * ceil(group / kHeads)), W
// warps per block. A warp splits into sub-warps of `lanes` lanes (the power of
// two ≥ the row's vectors), each lane owning one 16-byte slice of q, k and v.
// The context is cut into chunks of subs * kDecodeUnroll keys dealt round-robin
// to the S * W warps of a (sequence, head group); a warp loads all K and V rows
// of its chunk at once (and the block-table entries of its next chunk), then
// updates its own online softmax and V sums in registers. One barrier merges
// the warps' partial softmaxes; with kSplit the S blocks form a cluster and
// rank 0 merges the blocks' results through distributed shared memory.
constexpr int kDecodeUnroll = 4;      // keys per sub-warp and chunk
constexpr int kFastDecodeThreads = 256;  // the most threads a block gets (8 warps)
constexpr int kSplitMinTokens = 512;  // shorter contexts never split across blocks

// Shared floats of the warp-parallel decode kernel.
inline size_t FastDecodeSharedFloats(int warps, int heads, int d) {
  return (static_cast<size_t>(warps) + 1) * heads * (d + 2);
}

template <typename T, int VEC, int kHeads, bool kSplit>
__global__ void __launch_bounds__(kFastDecodeThreads, kHeads <= 2 ? 2 : 1) DecodeWarpKernel(AttnParams p) {
  constexpr int U = kDecodeUnroll;
  extern __shared__ __align__(16) float dec_smem[];
  const int warps = static_cast<int>(blockDim.x) / 32;
  const int split = blockIdx.x, splits = gridDim.x;
  const int b = blockIdx.y;
  const int chunks = (p.group + kHeads - 1) / kHeads;
  const int g = static_cast<int>(blockIdx.z) / chunks;
  const int chunk = static_cast<int>(blockIdx.z) % chunks;
  const int h0 = g * p.group + chunk * kHeads;
  const int rest = p.group - chunk * kHeads;
  const int nh = rest < kHeads ? rest : kHeads;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int d = p.head_dim, nv = d / VEC;
  int lanes = 1;
  while (lanes < nv) lanes <<= 1;  // nv ≤ 32 (checked by the launcher)
  const int subs = 32 / lanes;
  const int sub = lane / lanes, sl = lane % lanes;
  const bool active = sl < nv;
  const int per_chunk = subs * U;
  const int gw = split * warps + warp, total_warps = splits * warps;
  const int q_begin = p.query_start[b];
  const int q_len = p.query_start[b + 1] - q_begin;
  const int ctx = ContextOf(p, b);
  const int32_t* table = p.block_tables + static_cast<int64_t>(b) * p.max_blocks;
  const T* q = static_cast<const T*>(p.q);
  const T* k_cache = static_cast<const T*>(p.k_cache);
  const T* v_cache = static_cast<const T*>(p.v_cache);
  T* out = static_cast<T*>(p.out);
  const int64_t kv_stride = static_cast<int64_t>(p.hk) * d;  // elements between cache rows
  const int64_t kv_off = static_cast<int64_t>(g) * d + sl * VEC;

  float* o_s = dec_smem;                  // [warps][kHeads][d]: the warps' V sums
  float* m_s = o_s + warps * kHeads * d;  // [warps][kHeads]
  float* l_s = m_s + warps * kHeads;      // [warps][kHeads]
  float* bo_s = l_s + warps * kHeads;     // [kHeads][d]: the block's result (kSplit)
  float* bm_s = bo_s + kHeads * d;        // [kHeads]
  float* bl_s = bm_s + kHeads;            // [kHeads]

  // Written for one query row per sequence; more rows run one after the other.
  for (int i = 0; i < q_len; ++i) {
    const int64_t row = static_cast<int64_t>(q_begin) + i;
    if (row < 0 || row >= p.q_rows) break;
    const int visible = ctx - q_len + i + 1;  // positions 0 .. own position

    float qv[kHeads][VEC];
#pragma unroll
    for (int h = 0; h < kHeads; ++h) {
      if (h < nh && active) {
        LoadFloats<T, VEC>(q + (row * p.hq + h0 + h) * d + sl * VEC, qv[h]);
      } else {
#pragma unroll
        for (int j = 0; j < VEC; ++j) qv[h][j] = 0.0f;
      }
    }
    float acc[kHeads][VEC], m[kHeads], l[kHeads];
#pragma unroll
    for (int h = 0; h < kHeads; ++h) {
      m[h] = -INFINITY;
      l[h] = 0.0f;
#pragma unroll
      for (int j = 0; j < VEC; ++j) acc[h][j] = 0.0f;
    }

    // Slot of each of this lane's keys in chunk c: -2 past the visible
    // context (masked), -1 for a block outside the cache (a zero row).
    int64_t slot[U];
#pragma unroll
    for (int u = 0; u < U; ++u) slot[u] = -2;
    auto slots_of = [&](int c, int64_t(&s)[U]) {
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int pos = c * per_chunk + u * subs + sub;
        s[u] = pos < visible ? SlotOf(table, pos, p) : -2;
      }
    };
    int c = gw;
    if (c * per_chunk < visible) slots_of(c, slot);
    for (; c * per_chunk < visible; c += total_warps) {
      Vec<T, VEC> kr[U], vr[U];
#pragma unroll
      for (int u = 0; u < U; ++u) {
        if (slot[u] >= 0 && active) {
          const int64_t at = slot[u] * kv_stride + kv_off;
          kr[u] = *reinterpret_cast<const Vec<T, VEC>*>(k_cache + at);
          vr[u] = *reinterpret_cast<const Vec<T, VEC>*>(v_cache + at);
        } else {
#pragma unroll
          for (int j = 0; j < VEC; ++j) kr[u].v[j] = vr[u].v[j] = FromFloat<T>(0.0f);
        }
      }
      int64_t next[U];
#pragma unroll
      for (int u = 0; u < U; ++u) next[u] = -2;
      if ((c + total_warps) * per_chunk < visible) slots_of(c + total_warps, next);

      float s[U][kHeads];
#pragma unroll
      for (int u = 0; u < U; ++u) {
        float kf[VEC];
#pragma unroll
        for (int j = 0; j < VEC; ++j) kf[j] = ToFloat(kr[u].v[j]);
#pragma unroll
        for (int h = 0; h < kHeads; ++h) {
          float dot = 0.0f;
#pragma unroll
          for (int j = 0; j < VEC; ++j) dot += qv[h][j] * kf[j];
          for (int offset = lanes / 2; offset > 0; offset >>= 1) dot += __shfl_xor_sync(kFullMask, dot, offset);
          s[u][h] = slot[u] >= -1 ? dot * p.scale : -INFINITY;
        }
      }
#pragma unroll
      for (int h = 0; h < kHeads; ++h) {
        if (h >= nh) continue;
        float mx = s[0][h];
#pragma unroll
        for (int u = 1; u < U; ++u) mx = fmaxf(mx, s[u][h]);
        for (int offset = lanes; offset < 32; offset <<= 1) mx = fmaxf(mx, __shfl_xor_sync(kFullMask, mx, offset));
        // The chunk's first key is visible, so m_new is finite.
        const float m_new = fmaxf(m[h], mx);
        const float alpha = expf(m[h] - m_new);  // 0 on the warp's first chunk
        l[h] *= alpha;
#pragma unroll
        for (int j = 0; j < VEC; ++j) acc[h][j] *= alpha;
#pragma unroll
        for (int u = 0; u < U; ++u) {
          const float pr = expf(s[u][h] - m_new);
          l[h] += pr;
#pragma unroll
          for (int j = 0; j < VEC; ++j) acc[h][j] += pr * ToFloat(vr[u].v[j]);
        }
        m[h] = m_new;
      }
#pragma unroll
      for (int u = 0; u < U; ++u) slot[u] = next[u];
    }

    // The sub-warps saw different keys under one running max: add them up.
#pragma unroll
    for (int h = 0; h < kHeads; ++h) {
      if (h >= nh) continue;
      for (int offset = lanes; offset < 32; offset <<= 1) {
        l[h] += __shfl_xor_sync(kFullMask, l[h], offset);
#pragma unroll
        for (int j = 0; j < VEC; ++j) acc[h][j] += __shfl_xor_sync(kFullMask, acc[h][j], offset);
      }
      if (sub == 0 && active) {
#pragma unroll
        for (int j = 0; j < VEC; ++j) o_s[(warp * kHeads + h) * d + sl * VEC + j] = acc[h][j];
      }
      if (lane == 0) {
        m_s[warp * kHeads + h] = m[h];
        l_s[warp * kHeads + h] = l[h];
      }
    }
    __syncthreads();

    // Merge the warps: out = sum_w o_w e^(m_w - M) / sum_w l_w e^(m_w - M).
    // A warp that saw no keys has m = -inf, l = 0, o = 0 and adds nothing.
    for (int e = tid; e < nh * d; e += blockDim.x) {
      const int h = e / d, col = e % d;
      float m_max = -INFINITY;
      for (int w = 0; w < warps; ++w) m_max = fmaxf(m_max, m_s[w * kHeads + h]);
      const float m_use = m_max == -INFINITY ? 0.0f : m_max;
      float num = 0.0f, den = 0.0f;
      for (int w = 0; w < warps; ++w) {
        const float weight = expf(m_s[w * kHeads + h] - m_use);
        num += o_s[(w * kHeads + h) * d + col] * weight;
        den += l_s[w * kHeads + h] * weight;
      }
      if constexpr (kSplit) {
        bo_s[h * d + col] = num;
        if (col == 0) {
          bm_s[h] = m_max;
          bl_s[h] = den;
        }
      } else {
        out[(row * p.hq + h0 + h) * d + col] = FromFloat<T>(den > 0.0f ? num * (1.0f / den) : 0.0f);
      }
    }
    if constexpr (kSplit) {
      namespace cg = cooperative_groups;
      cg::cluster_group cluster = cg::this_cluster();
      cluster.sync();  // every block's bo_s, bm_s, bl_s are final
      if (cluster.block_rank() == 0) {
        for (int e = tid; e < nh * d; e += blockDim.x) {
          const int h = e / d, col = e % d;
          float m_max = -INFINITY;
          for (int r = 0; r < splits; ++r) m_max = fmaxf(m_max, cluster.map_shared_rank(bm_s, r)[h]);
          const float m_use = m_max == -INFINITY ? 0.0f : m_max;
          float num = 0.0f, den = 0.0f;
          for (int r = 0; r < splits; ++r) {
            const float weight = expf(cluster.map_shared_rank(bm_s, r)[h] - m_use);
            num += cluster.map_shared_rank(bo_s, r)[h * d + col] * weight;
            den += cluster.map_shared_rank(bl_s, r)[h] * weight;
          }
          out[(row * p.hq + h0 + h) * d + col] = FromFloat<T>(den > 0.0f ? num * (1.0f / den) : 0.0f);
        }
      }
      cluster.sync();  // rank 0 is done reading the others' shared memory
    } else {
      __syncthreads();  // the next row reuses o_s, m_s, l_s
    }
  }
}

template <typename T, int VEC, int kHeads>
absl::Status LaunchDecodeWarpWith(const AttnParams& p, int sms, cudaStream_t stream) {
  const int chunks = (p.group + kHeads - 1) / kHeads;
  const int64_t blocks = static_cast<int64_t>(p.num_seqs) * p.hk * chunks;
  const int64_t max_ctx = static_cast<int64_t>(p.max_blocks) * p.block_size;
  // Split the context only when the blocks alone leave SMs idle and each
  // block would otherwise stream a long context.
  int64_t splits = 1;
  if (blocks < sms && max_ctx > kSplitMinTokens) {
    splits = std::min<int64_t>({(sms + blocks - 1) / blocks, kMaxSplits,
                                (max_ctx + kSplitMinTokens - 1) / kSplitMinTokens});
    splits = std::max<int64_t>(splits, 1);
  }
  // Few blocks: 8 warps each, for more keys in flight; many: 4, for more blocks per SM.
  const int warps = blocks * splits <= sms ? 8 : 4;
  const size_t shared_bytes = FastDecodeSharedFloats(warps, kHeads, p.head_dim) * sizeof(float);
  const dim3 grid(static_cast<unsigned int>(splits), static_cast<unsigned int>(p.num_seqs),
                  static_cast<unsigned int>(p.hk * chunks));
  if (splits == 1) {
    auto kernel = DecodeWarpKernel<T, VEC, kHeads, false>;
    if (shared_bytes > 48 * 1024) {
      SEAM_CUDA_RETURN_IF_ERROR(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                     static_cast<int>(shared_bytes)));
    }
    kernel<<<grid, warps * 32, shared_bytes, stream>>>(p);
    SEAM_CUDA_RETURN_IF_ERROR(cudaGetLastError());
    return absl::OkStatus();
  }
  auto kernel = DecodeWarpKernel<T, VEC, kHeads, true>;
  if (shared_bytes > 48 * 1024) {
    SEAM_CUDA_RETURN_IF_ERROR(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                   static_cast<int>(shared_bytes)));
  }
  cudaLaunchConfig_t config = {};
  config.gridDim = grid;
  config.blockDim = dim3(static_cast<unsigned int>(warps * 32));
  config.dynamicSmemBytes = shared_bytes;
  config.stream = stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = static_cast<unsigned int>(splits);
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = 1;
  config.attrs = attr;
  config.numAttrs = 1;
  SEAM_CUDA_RETURN_IF_ERROR(cudaLaunchKernelEx(&config, kernel, p));
  return absl::OkStatus();
}

template <typename T, int VEC>
absl::Status LaunchDecodeWarp(const AttnParams& p, int sms, cudaStream_t stream) {
  if (p.group <= 1) return LaunchDecodeWarpWith<T, VEC, 1>(p, sms, stream);
  if (p.group <= 2) return LaunchDecodeWarpWith<T, VEC, 2>(p, sms, stream);
  if (p.group <= 4) return LaunchDecodeWarpWith<T, VEC, 4>(p, sms, stream);
  return LaunchDecodeWarpWith<T, VEC, 8>(p, sms, stream);
}

// Splits the context across a cluster only when the (sequence, head group)
// blocks alone would leave most SMs idle; from shapes only (the context is
// bounded by the block table's width).
template <typename T>
absl::Status LaunchDecode(const AttnParams& p, cudaStream_t stream) {
  if (p.num_seqs > 65535 || static_cast<int64_t>(p.hk) * ((p.group + kDecodeHeads - 1) / kDecodeHeads) > 65535) {
    return absl::InvalidArgumentError("PagedAttention: too many sequences or heads for the decode grid");
  }
  int device = 0, sms = 0;
  SEAM_CUDA_RETURN_IF_ERROR(cudaGetDevice(&device));
  SEAM_CUDA_RETURN_IF_ERROR(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  const int64_t blocks = static_cast<int64_t>(p.num_seqs) * p.hk * ((p.group + kDecodeHeads - 1) / kDecodeHeads);
  const int64_t max_tiles = (static_cast<int64_t>(p.max_blocks) * p.block_size + kDecodeTile - 1) / kDecodeTile;
  int64_t splits = blocks >= sms ? 1 : (sms + blocks - 1) / blocks;
  splits = std::min<int64_t>({splits, kMaxSplits, max_tiles});
  splits = std::max<int64_t>(splits, 1);
  constexpr int kVec = VecWidth<T>();
  const bool vectorized =
      p.head_dim % kVec == 0 && VecAligned<T>(p.k_cache, kVec) && VecAligned<T>(p.v_cache, kVec);
  if (vectorized && VecAligned<T>(p.q, kVec) && p.head_dim / kVec <= 32) {
    return LaunchDecodeWarp<T, kVec>(p, sms, stream);
  }
  if (vectorized) return LaunchDecodeWith<T, kVec>(p, static_cast<int>(splits), stream);
  return LaunchDecodeWith<T, 1>(p, static_cast<int>(splits), stream);
}

// ---- prefill ---------------------------------------------------------------------------

constexpr int kTileRows = 64;  // query rows per block
constexpr int kTileKeys = 32;  // keys per shared-memory tile
constexpr int kPrefillThreads = 256;  // 16 x 16: thread (ty, tx) owns rows ty + 16 i

// Floats of dynamic shared memory the prefill kernel needs for head_dim d.
inline size_t PrefillSharedFloats(int d) {
  return static_cast<size_t>(kTileRows) * (d + 1)        // q
         + static_cast<size_t>(kTileKeys) * (d + 1)      // k (padded: rows read across lanes)
         + static_cast<size_t>(kTileKeys) * d            // v
         + static_cast<size_t>(kTileRows) * (kTileKeys + 1)  // scores / probabilities
         + 2 * kTileRows;                                // row max, row sum
}

// Finds the (sequence, first row) of tile blockIdx.x, tiles numbered sequence
// by sequence; sequence -1 when the tile is past the last one.
__device__ void FindTile(const AttnParams& p, int* seq, int* first_row) {
  const int lane = threadIdx.x % 32;
  const int j = blockIdx.x;
  int base = 0;
  if (lane == 0) *seq = -1;
  __syncwarp();
  for (int b0 = 0; b0 < p.num_seqs; b0 += 32) {
    const int b = b0 + lane;
    int tiles = 0;
    if (b < p.num_seqs) {
      const int q_len = p.query_start[b + 1] - p.query_start[b];
      tiles = q_len > 0 ? (q_len + kTileRows - 1) / kTileRows : 0;
    }
    int incl = tiles;
#pragma unroll
    for (int offset = 1; offset < 32; offset <<= 1) {
      const int up = __shfl_up_sync(kFullMask, incl, offset);
      if (lane >= offset) incl += up;
    }
    const int excl = incl - tiles;
    if (tiles > 0 && j >= base + excl && j < base + incl) {
      *seq = b;
      *first_row = (j - base - excl) * kTileRows;
    }
    base += __shfl_sync(kFullMask, incl, 31);
    if (base > j) break;
  }
}

// Grid (ceil(T / kTileRows) + B, Hq). kDC: columns per thread, head_dim ≤ 16 * kDC.
template <typename T, int VEC, int kDC>
__global__ void __launch_bounds__(kPrefillThreads) PrefillKernel(AttnParams p) {
  extern __shared__ float smem[];
  __shared__ int tile_seq;
  __shared__ int tile_row;
  const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
  if (tid < 32) FindTile(p, &tile_seq, &tile_row);
  __syncthreads();
  const int b = tile_seq;
  if (b < 0) return;
  const int q0 = tile_row;

  const int d = p.head_dim, nv = d / VEC;
  const int h = blockIdx.y, g = h / p.group;
  const int q_begin = p.query_start[b];
  const int q_len = p.query_start[b + 1] - q_begin;
  const int ctx = ContextOf(p, b);
  const int rows = q_len - q0 < kTileRows ? q_len - q0 : kTileRows;
  const int first_pos = ctx - q_len + q0;  // position of the tile's row 0
  const int last_pos = first_pos + rows - 1;
  const int32_t* table = p.block_tables + static_cast<int64_t>(b) * p.max_blocks;
  const T* q = static_cast<const T*>(p.q);
  const T* k_cache = static_cast<const T*>(p.k_cache);
  const T* v_cache = static_cast<const T*>(p.v_cache);
  T* out = static_cast<T*>(p.out);

  const int qs = d + 1, ks = d + 1, ss = kTileKeys + 1;  // row strides
  float* q_s = smem;
  float* k_s = q_s + kTileRows * qs;
  float* v_s = k_s + kTileKeys * ks;
  float* s_s = v_s + kTileKeys * d;
  float* m_s = s_s + kTileRows * ss;
  float* l_s = m_s + kTileRows;

  for (int e = tid; e < kTileRows * d; e += kPrefillThreads) {
    const int r = e / d, c = e % d;
    const int64_t row = static_cast<int64_t>(q_begin) + q0 + r;
    q_s[r * qs + c] = r < rows && row < p.q_rows ? ToFloat(q[(row * p.hq + h) * d + c]) : 0.0f;
  }
  if (tid < kTileRows) {
    m_s[tid] = -INFINITY;
    l_s[tid] = 0.0f;
  }

  // Position of each of this thread's rows; rows past the tile's end act as
  // its last row (finite scores, never written).
  int row_pos[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int r = ty + 16 * i;
    row_pos[i] = r < rows ? first_pos + r : last_pos;
  }
  float acc[4][kDC];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
#pragma unroll
    for (int c = 0; c < kDC; ++c) acc[i][c] = 0.0f;
  }

  for (int k0 = 0; k0 <= last_pos; k0 += kTileKeys) {
    __syncthreads();  // previous tile fully consumed (and q_s, m_s, l_s ready on the first)
    for (int e = tid; e < kTileKeys * nv; e += kPrefillThreads) {
      const int t = e / nv, v = e % nv;
      const int pos = k0 + t;
      float kf[VEC], vf[VEC];
      const int64_t slot = pos <= last_pos ? SlotOf(table, pos, p) : -1;
      if (slot >= 0) {
        const int64_t at = (slot * p.hk + g) * d + v * VEC;
        LoadFloats<T, VEC>(k_cache + at, kf);
        LoadFloats<T, VEC>(v_cache + at, vf);
      } else {
#pragma unroll
        for (int j = 0; j < VEC; ++j) kf[j] = vf[j] = 0.0f;
      }
#pragma unroll
      for (int j = 0; j < VEC; ++j) {
        k_s[t * ks + v * VEC + j] = kf[j];
        v_s[t * d + v * VEC + j] = vf[j];
      }
    }
    __syncthreads();

    // Scores of rows ty + 16 i against keys tx and tx + 16, causally masked.
    {
      float s[4][2] = {};
      for (int c = 0; c < d; ++c) {
        const float k_a = k_s[tx * ks + c];
        const float k_b = k_s[(tx + 16) * ks + c];
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const float qv = q_s[(ty + 16 * i) * qs + c];
          s[i][0] += qv * k_a;
          s[i][1] += qv * k_b;
        }
      }
#pragma unroll
      for (int i = 0; i < 4; ++i) {
#pragma unroll
        for (int jj = 0; jj < 2; ++jj) {
          const int key = tx + 16 * jj;
          s_s[(ty + 16 * i) * ss + key] = k0 + key <= row_pos[i] ? s[i][jj] * p.scale : -INFINITY;
        }
      }
    }
    __syncthreads();

    // Online softmax: 4 threads per row, 8 keys each. The row's rescale
    // factor alpha for the PV phase is kept in s_s's padding column.
    {
      const int r = tid / 4, part = tid % 4;
      float* srow = s_s + r * ss;
      float mx = -INFINITY;
#pragma unroll
      for (int c = 0; c < kTileKeys / 4; ++c) mx = fmaxf(mx, srow[part * (kTileKeys / 4) + c]);
      mx = fmaxf(mx, __shfl_xor_sync(kFullMask, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(kFullMask, mx, 2));
      const float m_old = m_s[r];
      const float m_new = fmaxf(m_old, mx);
      const float m_use = m_new == -INFINITY ? 0.0f : m_new;  // only for malformed rows
      float sum = 0.0f;
#pragma unroll
      for (int c = 0; c < kTileKeys / 4; ++c) {
        const int at = part * (kTileKeys / 4) + c;
        const float e = expf(srow[at] - m_use);
        srow[at] = e;
        sum += e;
      }
      sum += __shfl_xor_sync(kFullMask, sum, 1);
      sum += __shfl_xor_sync(kFullMask, sum, 2);
      if (part == 0) {
        const float alpha = expf(m_old - m_use);
        l_s[r] = l_s[r] * alpha + sum;
        m_s[r] = m_new;
        srow[kTileKeys] = alpha;
      }
    }
    __syncthreads();

    // acc = acc * alpha + P V for rows ty + 16 i, columns tx + 16 c.
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float alpha = s_s[(ty + 16 * i) * ss + kTileKeys];
#pragma unroll
      for (int c = 0; c < kDC; ++c) acc[i][c] *= alpha;
    }
    const int keys = last_pos - k0 + 1 < kTileKeys ? last_pos - k0 + 1 : kTileKeys;
    for (int t = 0; t < keys; ++t) {
      float pr[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) pr[i] = s_s[(ty + 16 * i) * ss + t];
#pragma unroll
      for (int c = 0; c < kDC; ++c) {
        const int col = tx + 16 * c;
        const float v = col < d ? v_s[t * d + col] : 0.0f;
#pragma unroll
        for (int i = 0; i < 4; ++i) acc[i][c] += pr[i] * v;
      }
    }
  }
  __syncthreads();

#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int r = ty + 16 * i;
    const int64_t row = static_cast<int64_t>(q_begin) + q0 + r;
    if (r >= rows || row >= p.q_rows) continue;
    const float l = l_s[r];
    const float inv = l > 0.0f ? 1.0f / l : 0.0f;
#pragma unroll
    for (int c = 0; c < kDC; ++c) {
      const int col = tx + 16 * c;
      if (col < d) out[(row * p.hq + h) * d + col] = FromFloat<T>(acc[i][c] * inv);
    }
  }
}

template <typename T, int VEC, int kDC>
absl::Status LaunchPrefillWith(const AttnParams& p, cudaStream_t stream) {
  auto kernel = PrefillKernel<T, VEC, kDC>;
  const size_t shared_bytes = PrefillSharedFloats(p.head_dim) * sizeof(float);
  if (shared_bytes > 48 * 1024) {
    SEAM_CUDA_RETURN_IF_ERROR(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                   static_cast<int>(shared_bytes)));
  }
  const int64_t tiles = (p.q_rows + kTileRows - 1) / kTileRows + p.num_seqs;
  const dim3 grid(static_cast<unsigned int>(tiles), static_cast<unsigned int>(p.hq));
  kernel<<<grid, kPrefillThreads, shared_bytes, stream>>>(p);
  SEAM_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return absl::OkStatus();
}

template <typename T, int VEC>
absl::Status LaunchPrefillVec(const AttnParams& p, cudaStream_t stream) {
  if (p.head_dim <= 64) return LaunchPrefillWith<T, VEC, 4>(p, stream);
  if (p.head_dim <= 128) return LaunchPrefillWith<T, VEC, 8>(p, stream);
  return LaunchPrefillWith<T, VEC, 16>(p, stream);
}

// ---- prefill on tensor cores (bf16 / f16) -------------------------------------------------

// Same tiling as PrefillKernel, but the two products run as 16x16x16 WMMA
// steps with fp32 accumulation. Each of the 4 warps owns 16 query rows: it
// computes its 16 x 64 scores, runs the online softmax on them (2 lanes per
// row), rounds the probabilities to T for the P V product and keeps its fp32
// output rows in shared memory, where they are rescaled between key tiles
// (the fragment layout is opaque, so the rescale cannot be done in registers).
constexpr int kTcRows = kTileRows;  // 4 warps x 16 rows
constexpr int kTcKeys = 64;
constexpr int kTcThreads = 128;

constexpr size_t AlignUp128(size_t bytes) { return (bytes + 127) / 128 * 128; }

// Shared-memory layout (byte offsets) for head_dim kD. Strides are padded
// against bank conflicts and keep every fragment pointer 32-byte aligned.
template <int kD>
struct TcSmem {
  static constexpr int kLdH = kD + 8;       // q, k, v rows (T)
  static constexpr int kLdS = kTcKeys + 4;  // scores (fp32)
  static constexpr int kLdP = kTcKeys + 8;  // probabilities (T)
  static constexpr int kLdO = kD + 4;       // output accumulators (fp32)
  static constexpr size_t kQ = 0;
  static constexpr size_t kK = kQ + AlignUp128(size_t{kTcRows} * kLdH * 2);
  static constexpr size_t kV = kK + AlignUp128(size_t{kTcKeys} * kLdH * 2);
  static constexpr size_t kS = kV + AlignUp128(size_t{kTcKeys} * kLdH * 2);
  static constexpr size_t kP = kS + AlignUp128(size_t{kTcRows} * kLdS * 4);
  static constexpr size_t kO = kP + AlignUp128(size_t{kTcRows} * kLdP * 2);
  static constexpr size_t kM = kO + AlignUp128(size_t{kTcRows} * kLdO * 4);
  static constexpr size_t kL = kM + AlignUp128(size_t{kTcRows} * 4);
  static constexpr size_t kInfo = kL + AlignUp128(size_t{kTcRows} * 4);
  static constexpr size_t kBytes = kInfo + 128;
};

// Grid (ceil(T / kTcRows) + B, Hq); needs 16-byte aligned q and caches.
template <typename T, int kD>
__global__ void __launch_bounds__(kTcThreads) PrefillTcKernel(AttnParams p) {
  namespace wmma = nvcuda::wmma;
  using L = TcSmem<kD>;
  constexpr int kVec = 16 / sizeof(T);
  constexpr int kNv = kD / kVec;
  constexpr int kSteps = kD / 16;
  extern __shared__ __align__(128) unsigned char tc_smem[];
  T* q_s = reinterpret_cast<T*>(tc_smem + L::kQ);
  T* k_s = reinterpret_cast<T*>(tc_smem + L::kK);
  T* v_s = reinterpret_cast<T*>(tc_smem + L::kV);
  float* s_s = reinterpret_cast<float*>(tc_smem + L::kS);
  T* p_s = reinterpret_cast<T*>(tc_smem + L::kP);
  float* o_s = reinterpret_cast<float*>(tc_smem + L::kO);
  float* m_s = reinterpret_cast<float*>(tc_smem + L::kM);
  float* l_s = reinterpret_cast<float*>(tc_smem + L::kL);
  int* info = reinterpret_cast<int*>(tc_smem + L::kInfo);

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  if (warp == 0) FindTile(p, &info[0], &info[1]);
  __syncthreads();
  const int b = info[0];
  if (b < 0) return;
  const int q0 = info[1];

  const int h = blockIdx.y, g = h / p.group;
  const int q_begin = p.query_start[b];
  const int q_len = p.query_start[b + 1] - q_begin;
  const int ctx = ContextOf(p, b);
  const int rows = q_len - q0 < kTcRows ? q_len - q0 : kTcRows;
  const int first_pos = ctx - q_len + q0;
  const int last_pos = first_pos + rows - 1;
  const int32_t* table = p.block_tables + static_cast<int64_t>(b) * p.max_blocks;
  const T* q = static_cast<const T*>(p.q);
  const T* k_cache = static_cast<const T*>(p.k_cache);
  const T* v_cache = static_cast<const T*>(p.v_cache);
  T* out = static_cast<T*>(p.out);

  for (int e = tid; e < kTcRows * kNv; e += kTcThreads) {
    const int r = e / kNv, v = e % kNv;
    const int64_t row = static_cast<int64_t>(q_begin) + q0 + r;
    uint4 val = make_uint4(0, 0, 0, 0);
    if (r < rows && row < p.q_rows) val = *reinterpret_cast<const uint4*>(q + (row * p.hq + h) * kD + v * kVec);
    *reinterpret_cast<uint4*>(q_s + r * L::kLdH + v * kVec) = val;
  }
  for (int e = tid; e < kTcRows * L::kLdO; e += kTcThreads) o_s[e] = 0.0f;
  if (tid < kTcRows) {
    m_s[tid] = -INFINITY;
    l_s[tid] = 0.0f;
  }
  __syncthreads();

  // This warp's rows 16 w .. 16 w + 15; the last position any of them sees
  // (-1 when all are past the tile's end), and each lane's row for the softmax.
  const int w0 = 16 * warp;
  const int warp_last = w0 < rows ? first_pos + (w0 + 15 < rows ? w0 + 15 : rows - 1) : -1;
  const int my_row = w0 + lane / 2, half = lane % 2;
  const int my_pos = my_row < rows ? first_pos + my_row : last_pos;
  wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> q_frag[kSteps];
#pragma unroll
  for (int kk = 0; kk < kSteps; ++kk) wmma::load_matrix_sync(q_frag[kk], q_s + w0 * L::kLdH + kk * 16, L::kLdH);

  for (int k0 = 0; k0 <= last_pos; k0 += kTcKeys) {
    for (int e = tid; e < kTcKeys * kNv; e += kTcThreads) {
      const int t = e / kNv, v = e % kNv;
      const int pos = k0 + t;
      const int64_t slot = pos <= last_pos ? SlotOf(table, pos, p) : -1;
      uint4 kv = make_uint4(0, 0, 0, 0), vv = make_uint4(0, 0, 0, 0);
      if (slot >= 0) {
        const int64_t at = (slot * p.hk + g) * kD + v * kVec;
        kv = *reinterpret_cast<const uint4*>(k_cache + at);
        vv = *reinterpret_cast<const uint4*>(v_cache + at);
      }
      *reinterpret_cast<uint4*>(k_s + t * L::kLdH + v * kVec) = kv;
      *reinterpret_cast<uint4*>(v_s + t * L::kLdH + v * kVec) = vv;
    }
    __syncthreads();

    if (k0 <= warp_last) {
      // Key sub-tiles of 16 with at least one key this warp may see.
      const int subs = (warp_last - k0) / 16 + 1 < kTcKeys / 16 ? (warp_last - k0) / 16 + 1 : kTcKeys / 16;
      float* s_w = s_s + w0 * L::kLdS;
      for (int nt = 0; nt < subs; ++nt) {
        wmma::fragment<wmma::accumulator, 16, 16, 16, float> s_frag;
        wmma::fill_fragment(s_frag, 0.0f);
#pragma unroll
        for (int kk = 0; kk < kSteps; ++kk) {
          wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::col_major> k_frag;
          wmma::load_matrix_sync(k_frag, k_s + nt * 16 * L::kLdH + kk * 16, L::kLdH);
          wmma::mma_sync(s_frag, q_frag[kk], k_frag, s_frag);
        }
        wmma::store_matrix_sync(s_w + nt * 16, s_frag, L::kLdS, wmma::mem_row_major);
      }
      __syncwarp();

      // Online softmax: lanes 2r and 2r + 1 share row r, taking alternate keys.
      {
        const float* srow = s_s + my_row * L::kLdS;
        T* prow = p_s + my_row * L::kLdP;
        float mx = -INFINITY;
        for (int c = half; c < subs * 16; c += 2) {
          if (k0 + c <= my_pos) mx = fmaxf(mx, srow[c] * p.scale);
        }
        mx = fmaxf(mx, __shfl_xor_sync(kFullMask, mx, 1));
        const float m_old = m_s[my_row];
        const float m_new = fmaxf(m_old, mx);
        const float m_use = m_new == -INFINITY ? 0.0f : m_new;  // only for malformed rows
        float sum = 0.0f;
        for (int c = half; c < subs * 16; c += 2) {
          const T pr = FromFloat<T>(k0 + c <= my_pos ? expf(srow[c] * p.scale - m_use) : 0.0f);
          prow[c] = pr;
          sum += ToFloat(pr);  // the weights P V uses, so they sum to l exactly
        }
        sum += __shfl_xor_sync(kFullMask, sum, 1);
        const float alpha = expf(m_old - m_use);
        float* orow = o_s + my_row * L::kLdO;
        for (int c = half; c < kD; c += 2) orow[c] *= alpha;
        __syncwarp();  // both lanes of the row have read m_s
        if (half == 0) {
          l_s[my_row] = l_s[my_row] * alpha + sum;
          m_s[my_row] = m_new;
        }
      }
      __syncwarp();

      // O += P V over the same key sub-tiles.
#pragma unroll
      for (int nt = 0; nt < kSteps; ++nt) {
        wmma::fragment<wmma::accumulator, 16, 16, 16, float> o_frag;
        float* o_tile = o_s + w0 * L::kLdO + nt * 16;
        wmma::load_matrix_sync(o_frag, o_tile, L::kLdO, wmma::mem_row_major);
        for (int kk = 0; kk < subs; ++kk) {
          wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> p_frag;
          wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::row_major> v_frag;
          wmma::load_matrix_sync(p_frag, p_s + w0 * L::kLdP + kk * 16, L::kLdP);
          wmma::load_matrix_sync(v_frag, v_s + kk * 16 * L::kLdH + nt * 16, L::kLdH);
          wmma::mma_sync(o_frag, p_frag, v_frag, o_frag);
        }
        wmma::store_matrix_sync(o_tile, o_frag, L::kLdO, wmma::mem_row_major);
      }
    }
    __syncthreads();  // k_s, v_s are refilled next
  }

  for (int e = tid; e < kTcRows * kD; e += kTcThreads) {
    const int r = e / kD, c = e % kD;
    const int64_t row = static_cast<int64_t>(q_begin) + q0 + r;
    if (r >= rows || row >= p.q_rows) continue;
    const float l = l_s[r];
    const float inv = l > 0.0f ? 1.0f / l : 0.0f;
    out[(row * p.hq + h) * kD + c] = FromFloat<T>(o_s[r * L::kLdO + c] * inv);
  }
}

template <typename T, int kD>
absl::Status LaunchPrefillTc(const AttnParams& p, cudaStream_t stream) {
  auto kernel = PrefillTcKernel<T, kD>;
  constexpr size_t kBytes = TcSmem<kD>::kBytes;
  SEAM_CUDA_RETURN_IF_ERROR(
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(kBytes)));
  const int64_t tiles = (p.q_rows + kTcRows - 1) / kTcRows + p.num_seqs;
  const dim3 grid(static_cast<unsigned int>(tiles), static_cast<unsigned int>(p.hq));
  kernel<<<grid, kTcThreads, kBytes, stream>>>(p);
  SEAM_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return absl::OkStatus();
}

template <typename T>
absl::Status LaunchPrefill(const AttnParams& p, cudaStream_t stream) {
  constexpr int kVec = VecWidth<T>();
  const bool vectorized =
      p.head_dim % kVec == 0 && VecAligned<T>(p.k_cache, kVec) && VecAligned<T>(p.v_cache, kVec);
  if constexpr (!std::is_same_v<T, float>) {
    // Tensor cores for the common head sizes; the fp32 kernel for the rest.
    if (vectorized && VecAligned<T>(p.q, kVec)) {
      if (p.head_dim == 64) return LaunchPrefillTc<T, 64>(p, stream);
      if (p.head_dim == 128) return LaunchPrefillTc<T, 128>(p, stream);
      if (p.head_dim == 256) return LaunchPrefillTc<T, 256>(p, stream);
    }
  }
  if (vectorized) return LaunchPrefillVec<T, kVec>(p, stream);
  return LaunchPrefillVec<T, 1>(p, stream);
}

}  // namespace

absl::Status WriteKvCache(const Tensor& k, const Tensor& v, const Tensor& slot_mapping, const Tensor& k_cache,
                          const Tensor& v_cache) {
  if (k.numel() == 0) return absl::OkStatus();
  SEAM_RETURN_IF_ERROR(CheckCurrentDevice(k, "WriteKvCache"));
  if (k.dim(0) > 0x7fffffff) {
    return absl::InvalidArgumentError(absl::StrCat("WriteKvCache: ", k.dim(0), " rows are too many"));
  }
  const cudaStream_t stream = Stream();
  SEAM_RETURN_IF_ERROR(WriteOne(k, slot_mapping, k_cache, stream, "k"));
  return WriteOne(v, slot_mapping, v_cache, stream, "v");
}

absl::Status PagedAttention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                            const AttentionBatch& batch, float scale, const Tensor& out) {
  const DType dtype = q.dtype();
  if (k_cache.dtype() != dtype || v_cache.dtype() != dtype || out.dtype() != dtype) {
    return absl::UnimplementedError(absl::StrCat("PagedAttention: CUDA kernels take q, caches and out of one dtype, got q ",
                                                 DTypeName(dtype), ", k_cache ", DTypeName(k_cache.dtype()),
                                                 ", v_cache ", DTypeName(v_cache.dtype()), ", out ",
                                                 DTypeName(out.dtype())));
  }
  const int64_t rows = q.dim(0), seqs = batch.context_lens.dim(0), d = q.dim(2);
  if (rows == 0 || seqs == 0 || q.dim(1) == 0 || d == 0) return absl::OkStatus();
  if (d > kMaxHeadDim) {
    return absl::UnimplementedError(
        absl::StrCat("PagedAttention: CUDA kernels take head_dim up to ", kMaxHeadDim, ", got ", d));
  }
  if (rows > 0x7fffffff || seqs > 0x7fffffff || batch.block_tables.dim(1) * k_cache.dim(1) > 0x7fffffff) {
    return absl::InvalidArgumentError("PagedAttention: batch too large for 32-bit positions");
  }
  SEAM_RETURN_IF_ERROR(CheckCurrentDevice(q, "PagedAttention"));
  AttnParams p{};
  p.q = q.raw_data();
  p.k_cache = k_cache.raw_data();
  p.v_cache = v_cache.raw_data();
  p.out = out.raw_data();
  p.query_start = batch.query_start.data<int32_t>();
  p.context_lens = batch.context_lens.data<int32_t>();
  p.block_tables = batch.block_tables.data<int32_t>();
  p.q_rows = rows;
  p.num_seqs = static_cast<int>(seqs);
  p.max_blocks = static_cast<int>(batch.block_tables.dim(1));
  p.block_size = static_cast<int>(k_cache.dim(1));
  p.num_blocks = static_cast<int>(k_cache.dim(0));
  p.hq = static_cast<int>(q.dim(1));
  p.hk = static_cast<int>(k_cache.dim(2));
  p.group = p.hq / p.hk;
  p.head_dim = static_cast<int>(d);
  p.scale = scale;
  if (p.max_blocks == 0) return absl::OkStatus();  // every context is empty
  const cudaStream_t stream = Stream();
  // Every sequence has at least one query row, so T == B means one row each.
  const bool decode = rows == seqs;
  return DispatchFloat(dtype, "q", [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    return decode ? LaunchDecode<T>(p, stream) : LaunchPrefill<T>(p, stream);
  });
}

}  // namespace seam::kernels::cuda
