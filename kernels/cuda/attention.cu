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
//    group. Rows of at most 32 16-byte vectors (bf16/f16 up to head_dim 256,
//    f32 up to 128) take the warp-parallel kernel: every warp streams its own
//    chunks of keys (sub-warps of lanes per key, each lane one 16-byte slice,
//    a chunk's K and V rows loaded together, the block-table entries of its
//    first chunk read before the context length is known) with an online
//    softmax and the V sums in registers, and one barrier merges the warps.
//    When the blocks would fill less than half of the GPU's warp slots, a
//    block becomes a cluster of up to 8 blocks splitting the chunks (at least
//    two chunks each, with only as many warps as its share needs), merged by
//    rank 0 through distributed shared memory (no workspace, one kernel). Other rows take the older tiled kernel (tiles of 128 tokens
//    staged in shared memory, clusters when SMs would idle).
//  * Prefill and chunked prefill (anything else): one thread block per (tile
//    of 64 query rows of one sequence, query head), streaming K/V tiles
//    through shared memory with an online softmax per row; key tiles entirely
//    in the causal future of the query tile are never loaded. Tiles are
//    numbered over all sequences; each block finds its (sequence, first row)
//    by a warp scan of query_start, and the grid is sized by the bound
//    ceil(T / 64) + B on the number of tiles (blocks past the end exit).
//    bf16/f16 with head_dim 64 or 128 run a FlashAttention-2 style kernel
//    (mma.sync with the accumulators, softmax and probabilities in registers,
//    K/V double-buffered by cp.async); head_dim 256 runs both products as
//    WMMA steps with the output in shared memory. Both use fp32 accumulation
//    and round the probabilities to bf16/f16 for the P V product. Every other
//    case runs a kernel of fp32 FMAs.
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

// Cache row of position pos like SlotOf, as 32 bits: only for caches of at
// most 2^31 - 1 rows (checked by the launcher).
__device__ __forceinline__ int RowOf(const int32_t* table, int pos, const AttnParams& p) {
  const int32_t block = table[pos / p.block_size];
  if (block < 0 || block >= p.num_blocks) return -1;
  return block * p.block_size + pos % p.block_size;
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

// Shared floats of the warp-parallel decode kernel.
inline size_t FastDecodeSharedFloats(int warps, int heads, int d) {
  return (static_cast<size_t>(warps) + 1) * heads * (d + 2);
}

template <typename T, int VEC, int kHeads, int U, bool kSplit>
__global__ void __launch_bounds__(kFastDecodeThreads, kHeads <= 2 ? 2 : 1) DecodeWarpKernel(AttnParams p) {
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
  const int cap = p.max_blocks * p.block_size;  // positions the table can hold

  // Slots of this lane's keys in the warp's first chunk, read before the
  // context length and the query rows are known (-2 past the table), so the
  // block-table load overlaps the loads of query_start and context_lens.
  int first[U];
#pragma unroll
  for (int u = 0; u < U; ++u) {
    const int pos = gw * per_chunk + u * subs + sub;
    first[u] = pos < cap ? RowOf(table, pos, p) : -2;
  }

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
    int slot[U];
#pragma unroll
    for (int u = 0; u < U; ++u) slot[u] = gw * per_chunk + u * subs + sub < visible ? first[u] : -2;
    auto slots_of = [&](int c, int(&s)[U]) {
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int pos = c * per_chunk + u * subs + sub;
        s[u] = pos < visible ? RowOf(table, pos, p) : -2;
      }
    };
    int c = gw;
    for (; c * per_chunk < visible; c += total_warps) {
      Vec<T, VEC> kr[U], vr[U];
#pragma unroll
      for (int u = 0; u < U; ++u) {
        if (slot[u] >= 0 && active) {
          const int64_t at = static_cast<int64_t>(slot[u]) * kv_stride + kv_off;
          kr[u] = *reinterpret_cast<const Vec<T, VEC>*>(k_cache + at);
          vr[u] = *reinterpret_cast<const Vec<T, VEC>*>(v_cache + at);
        } else {
#pragma unroll
          for (int j = 0; j < VEC; ++j) kr[u].v[j] = vr[u].v[j] = FromFloat<T>(0.0f);
        }
      }
      int next[U];
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

// Grid shape of the warp-parallel decode kernel, from shapes only (the
// context is bounded by the block table's width). The (sequence, head group)
// blocks are split across a cluster whenever they alone would fill less than
// half of the GPU's warp slots (kDecodeWarpsPerSm per SM), up to the portable
// cluster size and never below two chunks per block; a block then gets only
// as many warps as the chunks of its share of the table need.
constexpr int kDecodeWarpsPerSm = 16;

struct DecodeShape {
  int splits;
  int warps;
};

inline DecodeShape ChooseDecodeShape(int64_t blocks, int64_t max_ctx, int64_t per_chunk, int sms) {
  const int64_t n_chunks = std::max<int64_t>((max_ctx + per_chunk - 1) / per_chunk, 1);
  const int64_t target = static_cast<int64_t>(sms) * kDecodeWarpsPerSm;
  int64_t splits = 1;
  if (blocks * 4 * 2 <= target) {
    splits = std::min<int64_t>((target + blocks * 4 - 1) / (blocks * 4), kMaxSplits);
    splits = std::min<int64_t>(splits, n_chunks / 2);
    splits = std::max<int64_t>(splits, 1);
  }
  // Few blocks: up to 8 warps each, for more keys in flight; many: 4, for more blocks per SM.
  int64_t warps = blocks * splits <= sms ? 8 : 4;
  warps = std::min<int64_t>(warps, (n_chunks + splits - 1) / splits);
  warps = std::max<int64_t>(warps, 1);
  return {static_cast<int>(splits), static_cast<int>(warps)};
}

template <typename T, int VEC, int kHeads, int U>
absl::Status LaunchDecodeWarpWith(const AttnParams& p, int sms, cudaStream_t stream) {
  const int chunks = (p.group + kHeads - 1) / kHeads;
  const int64_t blocks = static_cast<int64_t>(p.num_seqs) * p.hk * chunks;
  const int64_t max_ctx = static_cast<int64_t>(p.max_blocks) * p.block_size;
  int lanes = 1;
  while (lanes < p.head_dim / VEC) lanes <<= 1;
  const DecodeShape shape = ChooseDecodeShape(blocks, max_ctx, static_cast<int64_t>(32 / lanes) * U, sms);
  const int64_t splits = shape.splits;
  const int warps = shape.warps;
  const size_t shared_bytes = FastDecodeSharedFloats(warps, kHeads, p.head_dim) * sizeof(float);
  const dim3 grid(static_cast<unsigned int>(splits), static_cast<unsigned int>(p.num_seqs),
                  static_cast<unsigned int>(p.hk * chunks));
  if (splits == 1) {
    auto kernel = DecodeWarpKernel<T, VEC, kHeads, U, false>;
    if (shared_bytes > 48 * 1024) {
      SEAM_CUDA_RETURN_IF_ERROR(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                     static_cast<int>(shared_bytes)));
    }
    kernel<<<grid, warps * 32, shared_bytes, stream>>>(p);
    SEAM_CUDA_RETURN_IF_ERROR(cudaGetLastError());
    return absl::OkStatus();
  }
  auto kernel = DecodeWarpKernel<T, VEC, kHeads, U, true>;
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

// Groups of up to two query heads take chunks of 8 keys per sub-warp (twice
// the bytes in flight per warp); wider groups keep 4 to bound registers.
template <typename T, int VEC>
absl::Status LaunchDecodeWarp(const AttnParams& p, int sms, cudaStream_t stream) {
  if (p.group <= 1) return LaunchDecodeWarpWith<T, VEC, 1, kDecodeUnroll>(p, sms, stream);
  if (p.group <= 2) return LaunchDecodeWarpWith<T, VEC, 2, kDecodeUnroll>(p, sms, stream);
  if (p.group <= 4) return LaunchDecodeWarpWith<T, VEC, 4, kDecodeUnroll>(p, sms, stream);
  return LaunchDecodeWarpWith<T, VEC, 8, kDecodeUnroll>(p, sms, stream);
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
  // The warp-parallel kernel keeps cache rows in 32 bits.
  const bool rows_fit = static_cast<int64_t>(p.num_blocks) * p.block_size <= 0x7fffffff;
  if (vectorized && rows_fit && VecAligned<T>(p.q, kVec) && p.head_dim / kVec <= 32) {
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

// Finds the (sequence, first row) of tile j, tiles numbered sequence
// by sequence; sequence -1 when the tile is past the last one.
__device__ void FindTile(const AttnParams& p, int j, int* seq, int* first_row) {
  const int lane = threadIdx.x % 32;
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
  if (tid < 32) FindTile(p, static_cast<int>(blockIdx.x), &tile_seq, &tile_row);
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
  if (warp == 0) FindTile(p, static_cast<int>(blockIdx.x), &info[0], &info[1]);
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

// ---- prefill on tensor cores, FlashAttention-2 style (bf16 / f16, head_dim 64 or 128) -----

// Same tiles as PrefillKernel (64 query rows, so FindTile applies), 4 warps
// of 16 rows each. Both products run as mma.sync m16n8k16 with fp32
// accumulators that stay in registers: the scores come out in the layout of
// the P operand of P V, so the online softmax (rows split over the 4 lanes of
// a quad), the rescale of O and the rounding of P to T all happen in
// registers. K/V tiles of 64 keys are gathered through the block table with
// cp.async into two shared-memory buffers, the next tile loading while the
// current one is used. Tiles are taken heaviest first (the last query tiles
// of a sequence see the most keys); key tiles past the query tile's last
// position are never loaded, and only tiles that reach past a warp's first
// row are masked.
constexpr int kFaRows = kTileRows;  // 4 warps x 16 rows
constexpr int kFaKeys = 64;
constexpr int kFaThreads = 128;

template <int kD>
struct FaSmem {
  static constexpr int kLd = kD + 8;  // row stride in elements: conflict-free fragment reads
  static constexpr size_t kTileElems = size_t{kFaKeys} * kLd;
  static constexpr size_t kBytes = 4 * kTileElems * 2;  // two buffers of K and V, 2-byte elements
};

__device__ __forceinline__ uint16_t BitsOf(__nv_bfloat16 v) { return __bfloat16_as_ushort(v); }
__device__ __forceinline__ uint16_t BitsOf(__half v) { return __half_as_ushort(v); }

template <typename T>
__device__ __forceinline__ uint32_t PackPair(T lo, T hi) {
  return static_cast<uint32_t>(BitsOf(lo)) | (static_cast<uint32_t>(BitsOf(hi)) << 16);
}

// c += a b for a 16x16 (row-major) and b 16x8 (column-major) tile, fp32 accumulators.
template <typename T>
__device__ __forceinline__ void Mma16816(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}

// Four 8x8 matrices of 16-bit elements, transposed; lane l gives the address
// of row l % 8 of matrix l / 8.
__device__ __forceinline__ void LdMatrixX4Trans(uint32_t (&r)[4], const void* smem_ptr) {
  const auto addr = static_cast<uint32_t>(__cvta_generic_to_shared(smem_ptr));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr)
               : "memory");
}

// 16 bytes from global to shared without staging in registers; zeros when !valid.
__device__ __forceinline__ void CpAsync16(void* smem_ptr, const void* global_ptr, bool valid) {
  const auto addr = static_cast<uint32_t>(__cvta_generic_to_shared(smem_ptr));
  const int bytes = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(addr), "l"(global_ptr), "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void CpAsyncCommit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
__device__ __forceinline__ void CpAsyncWaitOne() { asm volatile("cp.async.wait_group 1;\n" ::: "memory"); }

// Grid (ceil(T / kFaRows) + B, Hq); needs 16-byte aligned q and caches.
template <typename T, int kD>
__global__ void __launch_bounds__(kFaThreads, 3) PrefillFaKernel(AttnParams p) {
  using L = FaSmem<kD>;
  constexpr int kLd = L::kLd;
  constexpr int kChunks = kD / 8;       // 16-byte pieces of a row
  constexpr int kKSteps = kD / 16;      // k steps of Q K^T
  constexpr int kOTiles = kD / 8;       // n tiles of O
  constexpr int kSTiles = kFaKeys / 8;  // n tiles of S
  constexpr int kPSteps = kFaKeys / 16;  // k steps of P V
  constexpr float kLog2e = 1.4426950408889634f;
  extern __shared__ __align__(128) unsigned char fa_smem[];
  T* kv_s = reinterpret_cast<T*>(fa_smem);  // [buffer][K, V][kFaKeys][kLd]
  __shared__ int info[2];

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  if (warp == 0) FindTile(p, static_cast<int>(gridDim.x - 1 - blockIdx.x), &info[0], &info[1]);
  __syncthreads();
  const int b = info[0];
  if (b < 0) return;
  const int q0 = info[1];

  const int h = blockIdx.y, g = h / p.group;
  const int q_begin = p.query_start[b];
  const int q_len = p.query_start[b + 1] - q_begin;
  const int ctx = ContextOf(p, b);
  const int rows = q_len - q0 < kFaRows ? q_len - q0 : kFaRows;
  const int first_pos = ctx - q_len + q0;
  const int last_pos = first_pos + rows - 1;
  const int32_t* table = p.block_tables + static_cast<int64_t>(b) * p.max_blocks;
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

  // Gathers keys k0 .. k0 + 63 into buffer buf; positions past the tile's
  // last one and blocks outside the cache become zero rows.
  auto load_tile = [&](int k0, int buf) {
    T* k_s = kv_s + static_cast<size_t>(buf) * 2 * L::kTileElems;
    T* v_s = k_s + L::kTileElems;
    for (int e = tid; e < kFaKeys * kChunks; e += kFaThreads) {
      const int t = e / kChunks, c = e % kChunks;
      const int pos = k0 + t;
      const int64_t slot = pos <= last_pos ? SlotOf(table, pos, p) : -1;
      const int64_t at = slot >= 0 ? (slot * p.hk + g) * kD + c * 8 : 0;
      CpAsync16(k_s + t * kLd + c * 8, k_cache + at, slot >= 0);
      CpAsync16(v_s + t * kLd + c * 8, v_cache + at, slot >= 0);
    }
  };

  float o[kOTiles][4];
#pragma unroll
  for (int nt = 0; nt < kOTiles; ++nt) o[nt][0] = o[nt][1] = o[nt][2] = o[nt][3] = 0.0f;
  float m_lo = -INFINITY, m_hi = -INFINITY, l_lo = 0.0f, l_hi = 0.0f;  // m in the log2 domain
  const float scale_log2 = p.scale * kLog2e;

  const int tiles = last_pos >= 0 ? last_pos / kFaKeys + 1 : 0;
  if (tiles > 0) load_tile(0, 0);
  CpAsyncCommit();
  for (int i = 0; i < tiles; ++i) {
    if (i + 1 < tiles) load_tile((i + 1) * kFaKeys, (i + 1) & 1);
    CpAsyncCommit();
    CpAsyncWaitOne();  // tile i has landed (for this thread) ...
    __syncthreads();   // ... and for every thread
    const int k0 = i * kFaKeys;
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
    __syncthreads();  // buffer i & 1 is refilled for tile i + 2
  }

  l_lo += __shfl_xor_sync(kFullMask, l_lo, 1);
  l_lo += __shfl_xor_sync(kFullMask, l_lo, 2);
  l_hi += __shfl_xor_sync(kFullMask, l_hi, 1);
  l_hi += __shfl_xor_sync(kFullMask, l_hi, 2);
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

template <typename T, int kD>
absl::Status LaunchPrefillFa(const AttnParams& p, cudaStream_t stream) {
  auto kernel = PrefillFaKernel<T, kD>;
  constexpr size_t kBytes = FaSmem<kD>::kBytes;
  SEAM_CUDA_RETURN_IF_ERROR(
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(kBytes)));
  const int64_t tiles = (p.q_rows + kFaRows - 1) / kFaRows + p.num_seqs;
  const dim3 grid(static_cast<unsigned int>(tiles), static_cast<unsigned int>(p.hq));
  kernel<<<grid, kFaThreads, kBytes, stream>>>(p);
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
      if (VecAligned<T>(p.out, 2)) {  // the output is stored as pairs
        if (p.head_dim == 64) return LaunchPrefillFa<T, 64>(p, stream);
        if (p.head_dim == 128) return LaunchPrefillFa<T, 128>(p, stream);
      }
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
