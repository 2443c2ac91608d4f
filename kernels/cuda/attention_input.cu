// Qwen3's fused attention input on CUDA: from the q|k|v projections of each
// token, the per-head RMSNorm of q and k, their rotary embedding, q out and
// k, v into the paged caches, in one launch.
//
// Design (head_dim D a multiple of 32 up to 256 with D / 32 a power of two:
// 32, 64, 128, 256): a block per (token, 16 heads) of the Hq + 2·Hk heads
// (q, k, v), 8 warps of 2 heads each, both heads' rows loaded before either
// is used. The block first computes its token's cos / sin of the D / 2
// rotary angles into shared memory, once for all its heads. Lane l holds
// features [l·E, l·E + E) of a row (E = D / 32) in one or two vector loads,
// so the partner of each of its features in rotate_half (i ± D / 2) sits in
// lane l ^ 16 and comes by one shuffle. Each row: sum of squares by
// shuffles, normalised and rounded to the storage dtype (as the separate
// RmsNorm does), then rotated (each step in fp32, rounded once, as
// RotaryEmbedding does); v heads are copied. On one H200 the earlier
// lane-strided kernel (a warp per (token, head), the angles per head: kept
// below for other D) took 257 us for 8,192 tokens of 48 heads of 128, 5.4x
// its bytes. Slots outside the cache are skipped, so bad slot values never
// write out of bounds (no host check: the launch issues no synchronisation
// and can be captured in a CUDA graph).
#include <cmath>

#include "cuda_common.cuh"
#include "cuda_ops.h"
#include "pdl_launch.cuh"

namespace seam::kernels::cuda {
namespace {

constexpr int kWarps = 4;
constexpr int kMaxDim = 256;

struct InvFreq {
  float v[kMaxDim / 2];
};

template <typename T>
__global__ void QkvNormRopeCacheKernel(const T* __restrict__ qkv, const T* __restrict__ q_norm,
                                       const T* __restrict__ k_norm, float eps, const int32_t* __restrict__ positions,
                                       const int32_t* __restrict__ slots, int64_t cache_slots, T* __restrict__ k_cache,
                                       T* __restrict__ v_cache, T* __restrict__ q_out, int hq, int hk, int d,
                                       InvFreq inv_freq) {
  __shared__ float row[kWarps][kMaxDim];
  PdlWait();  // qkv, positions and slots come from the kernels before; every block waits (pdl_launch.cuh)
  PdlLaunchDependents();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t t = blockIdx.x;
  const int head = blockIdx.y * kWarps + warp;
  const int heads = hq + 2 * hk;
  if (head >= heads) return;
  const T* src = qkv + t * static_cast<int64_t>(heads) * d + static_cast<int64_t>(head) * d;
  const int64_t slot = slots[t];
  const bool cached = slot >= 0 && slot < cache_slots;
  if (head >= hq + hk) {  // v: copied into the cache
    if (!cached) return;
    T* dst = v_cache + (slot * hk + (head - hq - hk)) * d;
    for (int i = lane; i < d; i += 32) dst[i] = src[i];
    return;
  }
  const bool is_q = head < hq;
  const T* w = is_q ? q_norm : k_norm;
  float sum = 0.0f;
  for (int i = lane; i < d; i += 32) {
    const float x = ToFloat(src[i]);
    row[warp][i] = x;
    sum += x * x;
  }
  for (int off = 16; off > 0; off >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, off);
  const float inv = 1.0f / sqrtf(sum / static_cast<float>(d) + eps);  // correctly rounded, as RmsNorm
  for (int i = lane; i < d; i += 32) {
    // RmsNorm's output is a tensor of the storage dtype: round here too.
    row[warp][i] = ToFloat(FromFloat<T>(row[warp][i] * inv * ToFloat(w[i])));
  }
  __syncwarp();
  T* dst;
  if (is_q) {
    dst = q_out + (t * hq + head) * static_cast<int64_t>(d);
  } else {
    if (!cached) return;
    dst = k_cache + (slot * hk + (head - hq)) * d;
  }
  const int half = d / 2;
  const float pos = static_cast<float>(positions[t]);
  for (int i = lane; i < half; i += 32) {
    float s, c;
    sincosf(pos * inv_freq.v[i], &s, &c);  // precise: angles reach the context length in radians
    const float x1 = row[warp][i], x2 = row[warp][i + half];
    dst[i] = FromFloat<T>(x1 * c - x2 * s);
    dst[i + half] = FromFloat<T>(x2 * c + x1 * s);
  }
}

constexpr int kVecWarps = 8, kVecHeadsPerWarp = 2, kVecHeadsPerBlock = kVecWarps * kVecHeadsPerWarp;

// E features of one row from p (lane-aligned), in vectors of at most 16 bytes.
template <typename T, int E>
__device__ __forceinline__ void LoadRow(const T* p, float (&x)[E]) {
  constexpr int V = E * sizeof(T) <= 16 ? E : 16 / static_cast<int>(sizeof(T));
#pragma unroll
  for (int j = 0; j < E; j += V) {
    float part[V];
    LoadFloats<T, V>(p + j, part);
#pragma unroll
    for (int k = 0; k < V; ++k) x[j + k] = part[k];
  }
}

template <typename T, int E>
__device__ __forceinline__ void StoreRow(T* p, const float (&x)[E]) {
  constexpr int V = E * sizeof(T) <= 16 ? E : 16 / static_cast<int>(sizeof(T));
#pragma unroll
  for (int j = 0; j < E; j += V) {
    float part[V];
#pragma unroll
    for (int k = 0; k < V; ++k) part[k] = x[j + k];
    StoreFloats<T, V>(p + j, part);
  }
}

// E = D / 32 features per lane (1, 2, 4 or 8).
template <typename T, int E>
__global__ void __launch_bounds__(kVecWarps * 32)
    QkvNormRopeCacheVecKernel(const T* __restrict__ qkv, const T* __restrict__ q_norm, const T* __restrict__ k_norm,
                              float eps, const int32_t* __restrict__ positions, const int32_t* __restrict__ slots,
                              int64_t cache_slots, T* __restrict__ k_cache, T* __restrict__ v_cache,
                              T* __restrict__ q_out, int hq, int hk, InvFreq inv_freq) {
  constexpr int D = E * 32, kHalf = D / 2;
  __shared__ float cos_of[kHalf], sin_of[kHalf];
  PdlWait();  // qkv, positions and slots come from the kernels before; every block waits (pdl_launch.cuh)
  PdlLaunchDependents();
  const int64_t t = blockIdx.x;
  const float pos = static_cast<float>(positions[t]);
  for (int i = threadIdx.x; i < kHalf; i += blockDim.x) {
    sincosf(pos * inv_freq.v[i], &sin_of[i], &cos_of[i]);  // precise: angles reach the context length in radians
  }
  const int64_t slot = slots[t];
  const bool cached = slot >= 0 && slot < cache_slots;
  const int heads = hq + 2 * hk;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, first = lane * E;
  const int head0 = blockIdx.y * kVecHeadsPerBlock + warp * kVecHeadsPerWarp;
  float x[kVecHeadsPerWarp][E];
#pragma unroll
  for (int h = 0; h < kVecHeadsPerWarp; ++h) {
    if (head0 + h < heads) LoadRow<T, E>(qkv + (t * heads + head0 + h) * static_cast<int64_t>(D) + first, x[h]);
  }
  __syncthreads();  // the angles
#pragma unroll
  for (int h = 0; h < kVecHeadsPerWarp; ++h) {
    const int head = head0 + h;
    if (head >= heads) break;  // the warp's heads are uniform across its lanes
    if (head >= hq + hk) {  // v: copied into the cache (a widened value rounds back to itself)
      if (cached) StoreRow<T, E>(v_cache + (slot * hk + (head - hq - hk)) * D + first, x[h]);
      continue;
    }
    const bool is_q = head < hq;
    float sum = 0.0f;
#pragma unroll
    for (int j = 0; j < E; ++j) sum += x[h][j] * x[h][j];
    for (int off = 16; off > 0; off >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, off);
    const float inv = 1.0f / sqrtf(sum / static_cast<float>(D) + eps);  // correctly rounded, as RmsNorm
    float w[E];
    LoadRow<T, E>((is_q ? q_norm : k_norm) + first, w);
    float partner[E];
#pragma unroll
    for (int j = 0; j < E; ++j) {
      x[h][j] = ToFloat(FromFloat<T>(x[h][j] * inv * w[j]));  // RmsNorm's output is of the storage dtype
    }
#pragma unroll
    for (int j = 0; j < E; ++j) partner[j] = __shfl_xor_sync(0xffffffffu, x[h][j], 16);
    if (!is_q && !cached) continue;
    // Lanes 0-15 hold the first halves (x1, partner x2), lanes 16-31 the second (x2, partner x1).
    const bool low = lane < 16;
    float out[E];
#pragma unroll
    for (int j = 0; j < E; ++j) {
      const int i = first + j - (low ? 0 : kHalf);
      const float c = cos_of[i], sn = sin_of[i];
      out[j] = low ? x[h][j] * c - partner[j] * sn : x[h][j] * c + partner[j] * sn;
    }
    T* dst = is_q ? q_out + (t * hq + head) * static_cast<int64_t>(D) : k_cache + (slot * hk + (head - hq)) * D;
    StoreRow<T, E>(dst + first, out);
  }
}

}  // namespace

absl::Status QkvNormRopeCache(const Tensor& qkv, const Tensor& q_norm, const Tensor& k_norm, float eps,
                              const Tensor& positions, float theta, const Tensor& slot_mapping,
                              const Tensor& k_cache, const Tensor& v_cache, const Tensor& q_out) {
  const int64_t t = q_out.dim(0);
  const int hq = static_cast<int>(q_out.dim(1)), d = static_cast<int>(q_out.dim(2));
  const int hk = static_cast<int>(k_cache.dim(2));
  for (const Tensor* other : {&q_norm, &k_norm, &k_cache, &v_cache, &q_out}) {
    if (other->dtype() != qkv.dtype()) {
      return absl::UnimplementedError(absl::StrCat("QkvNormRopeCache: the CUDA kernel needs qkv, the norms, the "
                                                   "caches and q_out of one dtype; qkv is ",
                                                   DTypeName(qkv.dtype()), ", another is ",
                                                   DTypeName(other->dtype())));
    }
  }
  if (d > kMaxDim) {
    return absl::UnimplementedError(
        absl::StrCat("QkvNormRopeCache: the CUDA kernel supports head_dim up to ", kMaxDim, ", got ", d));
  }
  if (t == 0) return absl::OkStatus();
  SEAM_RETURN_IF_ERROR(CheckCurrentDevice(qkv, "QkvNormRopeCache"));
  InvFreq inv_freq{};
  for (int i = 0; i < d / 2; ++i) {  // as RotaryEmbedding: 1 / theta^(float(2i) / float(D))
    inv_freq.v[i] = 1.0f / std::pow(theta, static_cast<float>(2 * i) / static_cast<float>(d));
  }
  const int64_t cache_slots = k_cache.dim(0) * k_cache.dim(1);
  return DispatchFloat(qkv.dtype(), "qkv", [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    const dim3 vec_grid(static_cast<unsigned int>(t),
                        static_cast<unsigned int>((hq + 2 * hk + kVecHeadsPerBlock - 1) / kVecHeadsPerBlock));
    const LaunchShape vec{vec_grid, dim3(kVecWarps * 32), 0, Stream()};
    const auto vectorized = [&](auto kernel) {
      return LaunchEnrolled(vec, kernel, qkv.data<T>(), q_norm.data<T>(), k_norm.data<T>(), eps,
                            positions.data<int32_t>(), slot_mapping.data<int32_t>(), cache_slots, k_cache.data<T>(),
                            v_cache.data<T>(), q_out.data<T>(), hq, hk, inv_freq);
    };
    switch (d) {
      case 32: return vectorized(QkvNormRopeCacheVecKernel<T, 1>);
      case 64: return vectorized(QkvNormRopeCacheVecKernel<T, 2>);
      case 128: return vectorized(QkvNormRopeCacheVecKernel<T, 4>);
      case 256: return vectorized(QkvNormRopeCacheVecKernel<T, 8>);
      default: break;
    }
    const dim3 grid(static_cast<unsigned int>(t), static_cast<unsigned int>((hq + 2 * hk + kWarps - 1) / kWarps));
    return LaunchEnrolled({grid, dim3(kWarps * 32), 0, Stream()}, QkvNormRopeCacheKernel<T>, qkv.data<T>(),
                          q_norm.data<T>(), k_norm.data<T>(), eps, positions.data<int32_t>(),
                          slot_mapping.data<int32_t>(), cache_slots, k_cache.data<T>(), v_cache.data<T>(),
                          q_out.data<T>(), hq, hk, d, inv_freq);
  });
}

}  // namespace seam::kernels::cuda
