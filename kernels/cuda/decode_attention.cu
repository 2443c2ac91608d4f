// Decode attention on CUDA (one query row per sequence, T == B): the choice
// between the warp-parallel kernel (decode_attention_warp.cu) and the older
// tiled kernel here, which takes every other row width: one thread block per
// (sequence, kv head, group of up to 8 query heads sharing it), tiles of 128
// tokens staged in shared memory, and thread-block clusters splitting the
// context when the blocks alone would leave SMs idle.
#include <cooperative_groups.h>

#include <algorithm>
#include <cmath>

#include "attention_common.cuh"
#include "pdl_launch.cuh"

namespace seam::kernels::cuda::attn {
namespace {

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
  PdlWait();  // q, the caches and the sequences' tables come from before; every block waits (pdl_launch.cuh)
  PdlLaunchDependents();

  const int split = blockIdx.x, splits = gridDim.x;
  const int b = blockIdx.y;
  const HeadGroup hg = HeadGroupOf(p, kDecodeHeads);
  const int g = hg.g, h0 = hg.h0, nh = hg.nh;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int d = p.head_dim, nv = d / VEC;
  const SeqView seq = SeqOf(p, b);
  const int q_begin = seq.q_begin, q_len = seq.q_len, ctx = seq.ctx;
  const int32_t* table = seq.table;
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

template <typename T, int VEC>
absl::Status LaunchDecodeWith(const AttnParams& p, int splits, cudaStream_t stream) {
  const int chunks = (p.group + kDecodeHeads - 1) / kDecodeHeads;
  const dim3 grid(static_cast<unsigned int>(splits), static_cast<unsigned int>(p.num_seqs),
                  static_cast<unsigned int>(p.hk * chunks));
  if (splits == 1) return LaunchEnrolled({grid, dim3(kDecodeThreads), 0, stream}, DecodeKernel<T, VEC, false>, p);
  return LaunchEnrolled({grid, dim3(kDecodeThreads), 0, stream, dim3(static_cast<unsigned int>(splits), 1, 1)},
                        DecodeKernel<T, VEC, true>, p);
}

}  // namespace

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
    return LaunchDecodeWarp<T>(p, sms, stream);
  }
  if (vectorized) return LaunchDecodeWith<T, kVec>(p, static_cast<int>(splits), stream);
  return LaunchDecodeWith<T, 1>(p, static_cast<int>(splits), stream);
}

template absl::Status LaunchDecode<float>(const AttnParams& p, cudaStream_t stream);
template absl::Status LaunchDecode<__nv_bfloat16>(const AttnParams& p, cudaStream_t stream);
template absl::Status LaunchDecode<__half>(const AttnParams& p, cudaStream_t stream);

}  // namespace seam::kernels::cuda::attn
