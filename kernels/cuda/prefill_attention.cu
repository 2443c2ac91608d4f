// Prefill attention on CUDA (anything but decode): the choice of kernel, and
// the tiled fp32 kernel that takes what the tensor-core kernels do not (f32,
// unaligned rows, other head sizes). One thread block per (tile of 64 query
// rows of one sequence, query head) streams K/V tiles of 32 keys through
// shared memory with an online softmax per row; key tiles entirely in the
// causal future of the query tile are never loaded.
#include <cmath>
#include <type_traits>

#include "attention_common.cuh"

namespace seam::kernels::cuda::attn {
namespace {

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
  const SeqView seq = SeqOf(p, b);
  const QueryTile tile = QueryTileOf(seq, q0);
  const int q_begin = seq.q_begin, rows = tile.rows;
  const int first_pos = tile.first_pos, last_pos = tile.last_pos;  // positions of the tile's first and last rows
  const int32_t* table = seq.table;
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

}  // namespace

template <typename T>
absl::Status LaunchPrefill(const AttnParams& p, cudaStream_t stream) {
  constexpr int kVec = VecWidth<T>();
  const bool vectorized =
      p.head_dim % kVec == 0 && VecAligned<T>(p.k_cache, kVec) && VecAligned<T>(p.v_cache, kVec);
  if constexpr (!std::is_same_v<T, float>) {
    // Tensor cores for the common head sizes; the fp32 kernel for the rest.
    if (vectorized && VecAligned<T>(p.q, kVec)) {
      const bool rows_fit = static_cast<int64_t>(p.num_blocks) * p.block_size <= 0x7fffffff;
      if (VecAligned<T>(p.out, 2) && rows_fit) {  // the output is stored as pairs; cache rows in 32 bits
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

template absl::Status LaunchPrefill<float>(const AttnParams& p, cudaStream_t stream);
template absl::Status LaunchPrefill<__nv_bfloat16>(const AttnParams& p, cudaStream_t stream);
template absl::Status LaunchPrefill<__half>(const AttnParams& p, cudaStream_t stream);

}  // namespace seam::kernels::cuda::attn
