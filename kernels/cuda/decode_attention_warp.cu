// The warp-parallel decode kernel (one query row per sequence) for
// vectorised rows of at most 32 16-byte vectors; decode_attention.cu chooses
// it. See the kernel's comment for the scheme.
#include <cooperative_groups.h>

#include <algorithm>
#include <cmath>

#include "attention_common.cuh"
#include "pdl_launch.cuh"

namespace seam::kernels::cuda::attn {
namespace {

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
  PdlWait();  // q, the caches and the sequences' tables come from before; every block waits (pdl_launch.cuh)
  PdlLaunchDependents();
  const int warps = static_cast<int>(blockDim.x) / 32;
  const int split = blockIdx.x, splits = gridDim.x;
  const int b = blockIdx.y;
  const HeadGroup hg = HeadGroupOf(p, kHeads);
  const int g = hg.g, h0 = hg.h0, nh = hg.nh;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int d = p.head_dim, nv = d / VEC;
  int lanes = 1;
  while (lanes < nv) lanes <<= 1;  // nv ≤ 32 (checked by the launcher)
  const int subs = 32 / lanes;
  const int sub = lane / lanes, sl = lane % lanes;
  const bool active = sl < nv;
  const int per_chunk = subs * U;
  const int gw = split * warps + warp, total_warps = splits * warps;
  const SeqView seq = SeqOf(p, b);
  const int q_begin = seq.q_begin, q_len = seq.q_len, ctx = seq.ctx;
  const int32_t* table = seq.table;
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
// context is bounded by the block table's width, which in a decode graph is
// its largest context, not the one it replays with). The (sequence, head
// group) blocks are split across a cluster only while they are at most
// kDecodeSplitMaxBlocks (a batch of 1-4 sequences at 8 KV heads): splitting
// up to half the GPU's warp slots, as before, made the attention of 16-32
// sequences several times slower than its KV bytes (clusters of blocks with
// a few keys each, most of the graph's chunks empty); on an H200 the
// decode step at batch 8 / 16 / 32 went from 1.436 / 1.482 / 1.72 ms to
// 1.282 / 1.258 / 1.415 ms, batch 1-4 unchanged (bench/results/
// 2026-12-01-h200-gemv-batch1/run6-decode-split). Split, the blocks reach
// towards kDecodeWarpsPerSm warps per SM, up to the portable cluster size and
// never below two chunks per block; a block then gets only as many warps as
// the chunks of its share of the table need.
constexpr int kDecodeWarpsPerSm = 16;
constexpr int64_t kDecodeSplitMaxBlocks = 32;

struct DecodeShape {
  int splits;
  int warps;
};

inline DecodeShape ChooseDecodeShape(int64_t blocks, int64_t max_ctx, int64_t per_chunk, int sms) {
  const int64_t n_chunks = std::max<int64_t>((max_ctx + per_chunk - 1) / per_chunk, 1);
  const int64_t target = static_cast<int64_t>(sms) * kDecodeWarpsPerSm;
  int64_t splits = 1;
  if (blocks <= kDecodeSplitMaxBlocks) {
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
    return LaunchEnrolled({grid, dim3(static_cast<unsigned int>(warps * 32)), shared_bytes, stream}, kernel, p);
  }
  auto kernel = DecodeWarpKernel<T, VEC, kHeads, U, true>;
  if (shared_bytes > 48 * 1024) {
    SEAM_CUDA_RETURN_IF_ERROR(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                   static_cast<int>(shared_bytes)));
  }
  return LaunchEnrolled({grid, dim3(static_cast<unsigned int>(warps * 32)), shared_bytes, stream,
                         dim3(static_cast<unsigned int>(splits), 1, 1)},
                        kernel, p);
}

// Groups of up to two query heads take chunks of 8 keys per sub-warp (twice
// the bytes in flight per warp); wider groups keep 4 to bound registers.
template <typename T, int VEC>
absl::Status LaunchDecodeWarpVec(const AttnParams& p, int sms, cudaStream_t stream) {
  if (p.group <= 1) return LaunchDecodeWarpWith<T, VEC, 1, kDecodeUnroll>(p, sms, stream);
  if (p.group <= 2) return LaunchDecodeWarpWith<T, VEC, 2, kDecodeUnroll>(p, sms, stream);
  if (p.group <= 4) return LaunchDecodeWarpWith<T, VEC, 4, kDecodeUnroll>(p, sms, stream);
  return LaunchDecodeWarpWith<T, VEC, 8, kDecodeUnroll>(p, sms, stream);
}

}  // namespace

template <typename T>
absl::Status LaunchDecodeWarp(const AttnParams& p, int sms, cudaStream_t stream) {
  return LaunchDecodeWarpVec<T, VecWidth<T>()>(p, sms, stream);
}

template absl::Status LaunchDecodeWarp<float>(const AttnParams& p, int sms, cudaStream_t stream);
template absl::Status LaunchDecodeWarp<__nv_bfloat16>(const AttnParams& p, int sms, cudaStream_t stream);
template absl::Status LaunchDecodeWarp<__half>(const AttnParams& p, int sms, cudaStream_t stream);

}  // namespace seam::kernels::cuda::attn
