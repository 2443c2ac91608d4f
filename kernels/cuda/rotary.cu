// Rotary position embedding on CUDA, NeoX/HF rotate_half convention, in place
// on q [T, Hq, D] and k [T, Hk, D]. One block per (token, group of
// kHeadsPerBlock heads of q then k): the block computes the token's cos/sin
// table in shared memory, then rotates its heads. (One block per token and
// all heads took ~10 us for a decode step's 64 + 1 MLA rope heads on an
// H200 whatever the batch, the heads walked by 128 threads one after another.)
#include <cmath>

#include "cuda_common.cuh"
#include "cuda_ops.h"

namespace seam::kernels::cuda {
namespace {

constexpr int kThreads = 128;
constexpr int kMaxHalf = 256;  // rotary_dim up to 512
constexpr int kHeadsPerBlock = 8;

// Passed by value as a kernel argument (1 KiB, under the 4 KiB parameter limit).
struct InvFreq {
  float v[kMaxHalf];
};

struct RotaryParams {
  void* q;
  void* k;
  const int32_t* positions;
  int64_t tokens;
  int q_heads;
  int k_heads;
  int head_dim;
  int half;  // rotary_dim / 2
  InvFreq inv_freq;
};

template <typename T>
__global__ void RotaryKernel(T* q, T* k, const int32_t* positions, int64_t tokens, int q_heads, int k_heads,
                             int head_dim, int half, InvFreq inv_freq) {
  __shared__ float cos_s[kMaxHalf];
  __shared__ float sin_s[kMaxHalf];
  const int first_head = static_cast<int>(blockIdx.y) * kHeadsPerBlock;
  const int heads = min(kHeadsPerBlock, q_heads + k_heads - first_head);
  const int pairs = heads * half;
  for (int64_t t = blockIdx.x; t < tokens; t += gridDim.x) {
    const float pos = static_cast<float>(positions[t]);
    for (int i = threadIdx.x; i < half; i += blockDim.x) {
      // Precise sincosf: angles reach the context length in radians.
      sincosf(pos * inv_freq.v[i], &sin_s[i], &cos_s[i]);
    }
    __syncthreads();
    for (int j = threadIdx.x; j < pairs; j += blockDim.x) {
      const int h = first_head + j / half;
      const int i = j - (j / half) * half;
      T* head = h < q_heads ? q + (t * q_heads + h) * head_dim : k + (t * k_heads + (h - q_heads)) * head_dim;
      const float x1 = ToFloat(head[i]);
      const float x2 = ToFloat(head[i + half]);
      head[i] = FromFloat<T>(x1 * cos_s[i] - x2 * sin_s[i]);
      head[i + half] = FromFloat<T>(x2 * cos_s[i] + x1 * sin_s[i]);
    }
    __syncthreads();  // the next token overwrites the table
  }
}

}  // namespace

absl::Status RotaryEmbedding(const Tensor& q, const Tensor& k, const Tensor& positions, float theta,
                             int64_t rotary_dim) {
  if (k.dtype() != q.dtype()) {
    return absl::UnimplementedError(absl::StrCat("RotaryEmbedding: CUDA kernel needs q and k of one dtype, got ",
                                                 DTypeName(q.dtype()), " and ", DTypeName(k.dtype())));
  }
  if (rotary_dim / 2 > kMaxHalf) {
    return absl::UnimplementedError(
        absl::StrCat("RotaryEmbedding: CUDA kernel supports rotary_dim up to ", 2 * kMaxHalf, ", got ", rotary_dim));
  }
  const int64_t tokens = q.dim(0);
  if (tokens == 0 || rotary_dim < 2) return absl::OkStatus();
  SEAM_RETURN_IF_ERROR(CheckCurrentDevice(q, "RotaryEmbedding"));
  RotaryParams p{q.raw_data(),
                 k.raw_data(),
                 positions.data<int32_t>(),
                 tokens,
                 static_cast<int>(q.dim(1)),
                 static_cast<int>(k.dim(1)),
                 static_cast<int>(q.dim(2)),
                 static_cast<int>(rotary_dim / 2),
                 {}};
  // Hugging Face's fp32 computation: inv_freq[i] = 1 / theta^(float(2i) / float(rotary_dim)).
  for (int i = 0; i < p.half; ++i) {
    p.inv_freq.v[i] = 1.0f / std::pow(theta, static_cast<float>(2 * i) / static_cast<float>(rotary_dim));
  }
  const cudaStream_t stream = Stream();
  return DispatchFloat(q.dtype(), "q", [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    const unsigned int blocks = static_cast<unsigned int>(p.tokens < 65535 * 16 ? p.tokens : 65535 * 16);
    const int64_t groups = (int64_t{p.q_heads} + p.k_heads + kHeadsPerBlock - 1) / kHeadsPerBlock;
    if (groups > 65535) {
      return absl::UnimplementedError(
          absl::StrCat("RotaryEmbedding: CUDA kernel takes at most ", 65535 * kHeadsPerBlock, " heads"));
    }
    RotaryKernel<T><<<dim3(blocks, static_cast<unsigned int>(groups)), kThreads, 0, stream>>>(
        static_cast<T*>(p.q), static_cast<T*>(p.k), p.positions, p.tokens, p.q_heads, p.k_heads, p.head_dim, p.half,
        p.inv_freq);
    SEAM_CUDA_RETURN_IF_ERROR(cudaGetLastError());
    return absl::OkStatus();
  });
}

}  // namespace seam::kernels::cuda
