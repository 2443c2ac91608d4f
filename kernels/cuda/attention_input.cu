// Qwen3's fused attention input on CUDA: from the q|k|v projections of each
// token, the per-head RMSNorm of q and k, their rotary embedding, q out and
// k, v into the paged caches, in one launch.
//
// Design: one warp per (token, head), 4 warps per block; grid (tokens,
// ceil(heads / 4)) where heads = Hq + 2·Hk (q heads, k heads, v heads). A
// warp reads its head's D features (D ≤ 256, lane-strided), reduces the sum
// of squares with shuffles, normalises and rounds to the storage dtype (as
// the separate RmsNorm does), stages the row in shared memory and applies
// rotate_half RoPE pairwise (each step in fp32, rounded once, as
// RotaryEmbedding does). v heads are copied. Slots outside the cache are
// skipped, so bad slot values never write out of bounds (no host check: the
// launch issues no synchronisation and can be captured in a CUDA graph).
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
  const dim3 grid(static_cast<unsigned int>(t), static_cast<unsigned int>((hq + 2 * hk + kWarps - 1) / kWarps));
  return DispatchFloat(qkv.dtype(), "qkv", [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    return LaunchEnrolled({grid, dim3(kWarps * 32), 0, Stream()}, QkvNormRopeCacheKernel<T>, qkv.data<T>(),
                          q_norm.data<T>(), k_norm.data<T>(), eps, positions.data<int32_t>(),
                          slot_mapping.data<int32_t>(), cache_slots, k_cache.data<T>(), v_cache.data<T>(),
                          q_out.data<T>(), hq, hk, d, inv_freq);
  });
}

}  // namespace seam::kernels::cuda
