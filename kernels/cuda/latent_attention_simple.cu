// Latent attention on CUDA cores: one thread block of four warps per (query
// row, head), fp32 arithmetic for any dtypes of q and the cache. Each warp
// takes every fourth visible position: the score is a warp-wide dot product
// of the row with q (held in shared memory as fp32), folded into the warp's
// online softmax, and the row's first Dc entries into the warp's fp32
// accumulator in shared memory (each lane owns columns lane, lane + 32, ...).
// The four warps' partial softmaxes merge at the end. The reference-shaped
// path for f32 and for the shapes the tensor-core kernel does not take.
#include <cmath>

#include "cuda_common.cuh"
#include "latent_attention.cuh"

namespace seam::kernels::cuda::mla {
namespace {

constexpr int kWarps = 4;

// The sequence whose query rows hold `row`: the last b with query_start[b] <= row.
__device__ __forceinline__ int SequenceOfRow(const LatentParams& p, int64_t row) {
  int lo = 0, hi = p.num_seqs - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (p.query_start[mid] <= row) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return lo;
}

// Grid (T, Hq), kWarps * 32 threads; shared memory: q [width], then per
// warp an accumulator [dc] and its (max, sum).
template <typename T, typename C>
__global__ void __launch_bounds__(kWarps * 32) LatentSimpleKernel(LatentParams p) {
  extern __shared__ float simple_smem[];
  float* q_s = simple_smem;
  float* acc_s = q_s + p.width;
  float* ml_s = acc_s + kWarps * p.dc;
  const int64_t row = blockIdx.x;
  const int h = static_cast<int>(blockIdx.y);
  const int lane = static_cast<int>(threadIdx.x) % 32, warp = static_cast<int>(threadIdx.x) / 32;
  const int b = SequenceOfRow(p, row);
  const int q_begin = p.query_start[b], q_len = p.query_start[b + 1] - q_begin;
  const int ctx = LatentContextOf(p, b);
  const int pos = ctx - q_len + static_cast<int>(row - q_begin);  // this row's position
  const int32_t* table = p.block_tables + static_cast<int64_t>(b) * p.max_blocks;
  const T* q = static_cast<const T*>(p.q) + (row * p.hq + h) * p.width;
  for (int j = static_cast<int>(threadIdx.x); j < p.width; j += blockDim.x) q_s[j] = ToFloat(q[j]);
  float* acc = acc_s + warp * p.dc;
  for (int j = lane; j < p.dc; j += 32) acc[j] = 0.0f;
  __syncthreads();

  const C* cache = static_cast<const C*>(p.cache);
  float m = -INFINITY, l = 0.0f;
  for (int k = warp; k <= pos; k += kWarps) {
    const int r = LatentRowOf(p, table, k);
    const C* kv = cache + static_cast<int64_t>(r < 0 ? 0 : r) * p.width;
    float dot = 0.0f;
    if (r >= 0) {
      for (int j = lane; j < p.width; j += 32) dot += q_s[j] * ToFloat(kv[j]);
    }
    const float s = WarpSum(dot) * p.scale;
    const float m_new = fmaxf(m, s);
    const float alpha = expf(m - m_new), e = expf(s - m_new);
    l = l * alpha + e;
    m = m_new;
    for (int j = lane; j < p.dc; j += 32) acc[j] = acc[j] * alpha + (r >= 0 ? e * ToFloat(kv[j]) : 0.0f);
  }
  if (lane == 0) {
    ml_s[warp * 2] = m;
    ml_s[warp * 2 + 1] = l;
  }
  __syncthreads();
  float m_max = -INFINITY;
  for (int w = 0; w < kWarps; ++w) m_max = fmaxf(m_max, ml_s[w * 2]);
  float den = 0.0f;
  for (int w = 0; w < kWarps; ++w) {
    if (ml_s[w * 2] != -INFINITY) den += ml_s[w * 2 + 1] * expf(ml_s[w * 2] - m_max);
  }
  T* out = static_cast<T*>(p.out) + (row * p.hq + h) * p.dc;
  for (int j = static_cast<int>(threadIdx.x); j < p.dc; j += blockDim.x) {
    float num = 0.0f;
    for (int w = 0; w < kWarps; ++w) {
      if (ml_s[w * 2] != -INFINITY) num += acc_s[w * p.dc + j] * expf(ml_s[w * 2] - m_max);
    }
    out[j] = FromFloat<T>(den > 0.0f ? num / den : 0.0f);
  }
}

}  // namespace

template <typename T, typename C>
absl::Status LaunchLatentSimple(const LatentParams& p, cudaStream_t stream) {
  const size_t smem = (static_cast<size_t>(p.width) + static_cast<size_t>(kWarps) * p.dc + 2 * kWarps) * sizeof(float);
  auto kernel = LatentSimpleKernel<T, C>;
  if (smem > 48 * 1024) {
    SEAM_CUDA_RETURN_IF_ERROR(
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
  }
  const dim3 grid(static_cast<unsigned int>(p.q_rows), static_cast<unsigned int>(p.hq));
  kernel<<<grid, kWarps * 32, smem, stream>>>(p);
  SEAM_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return absl::OkStatus();
}

#define SEAM_LATENT_SIMPLE(T, C) template absl::Status LaunchLatentSimple<T, C>(const LatentParams&, cudaStream_t);
SEAM_LATENT_SIMPLE(float, float)
SEAM_LATENT_SIMPLE(float, __nv_bfloat16)
SEAM_LATENT_SIMPLE(float, __half)
SEAM_LATENT_SIMPLE(__nv_bfloat16, float)
SEAM_LATENT_SIMPLE(__nv_bfloat16, __nv_bfloat16)
SEAM_LATENT_SIMPLE(__nv_bfloat16, __half)
SEAM_LATENT_SIMPLE(__half, float)
SEAM_LATENT_SIMPLE(__half, __nv_bfloat16)
SEAM_LATENT_SIMPLE(__half, __half)
#undef SEAM_LATENT_SIMPLE

}  // namespace seam::kernels::cuda::mla
