// CausalConv1d on CUDA: Mamba2's depthwise causal conv continuing each
// sequence from its conv state. Two launches in stream order: one thread per
// (token, channel) output, which finds its sequence by a binary search of the
// query starts and reads the window's older entries from the stored state;
// then one thread per (sequence, channel) shifting the state to the window's
// last K - 1 entries. The second launch runs after every read of the old
// state, so prefill and the one-token decode update share both kernels.
#include "cuda_common.cuh"
#include "cuda_ops.h"
#include "mamba_sequences.cuh"

namespace seam::kernels::cuda {
namespace {

constexpr int kThreads = 256;

struct ConvParams {
  const void* x;       // [T, C], T
  const void* weight;  // [C, K], W
  const void* bias;    // [C], W, or null
  float* state;        // [slots, K - 1, C]
  void* out;           // [T, C], T
  const int32_t* query_start;
  const int32_t* slots;
  int64_t tokens, channels, seqs, num_slots;
  int k;
  bool silu;
};

// Entry w of sequence s's window: the stored state below K - 1, the
// sequence's rows of x from there on (a padding sequence's state is zero).
template <typename T>
__device__ __forceinline__ float WindowAt(const ConvParams& p, const T* x, int64_t begin, int slot, int64_t w,
                                          int64_t c) {
  const int64_t kept = p.k - 1;
  if (w >= kept) return ToFloat(x[(begin + w - kept) * p.channels + c]);
  return slot >= 0 ? p.state[(slot * kept + w) * p.channels + c] : 0.0f;
}

template <typename T, typename W>
__global__ void ConvOutKernel(ConvParams p) {
  const T* x = static_cast<const T*>(p.x);
  const W* weight = static_cast<const W*>(p.weight);
  const W* bias = static_cast<const W*>(p.bias);
  T* out = static_cast<T*>(p.out);
  const int64_t total = p.tokens * p.channels;
  for (int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; idx < total;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t t = idx / p.channels, c = idx - t * p.channels;
    const int s = SequenceOfRow(p.query_start, p.seqs, t);
    const int64_t begin = p.query_start[s];
    const int slot = UsableSlot(p.slots[s], p.num_slots);
    // Row t is window entry (t - begin) + K - 1; its taps are the K entries ending there.
    float acc = bias != nullptr ? ToFloat(bias[c]) : 0.0f;
    for (int j = 0; j < p.k; ++j) acc += ToFloat(weight[c * p.k + j]) * WindowAt(p, x, begin, slot, t - begin + j, c);
    out[idx] = FromFloat<T>(p.silu ? acc / (1.0f + expf(-acc)) : acc);
  }
}

// The new state is the window's last K - 1 entries: entry len + r goes to
// row r. Ascending r reads entry len + r >= r before anything overwrites it.
template <typename T>
__global__ void ConvStateKernel(ConvParams p) {
  const T* x = static_cast<const T*>(p.x);
  const int64_t total = p.seqs * p.channels, kept = p.k - 1;
  for (int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; idx < total;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t s = idx / p.channels, c = idx - s * p.channels;
    const int slot = UsableSlot(p.slots[s], p.num_slots);
    if (slot < 0) continue;
    const int64_t begin = p.query_start[s], len = p.query_start[s + 1] - begin;
    for (int64_t r = 0; r < kept; ++r) {
      p.state[(slot * kept + r) * p.channels + c] = WindowAt(p, x, begin, slot, len + r, c);
    }
  }
}

}  // namespace

absl::Status CausalConv1d(const Tensor& x, const Tensor& weight, const Tensor& bias, bool silu,
                          const Tensor& conv_state, const SequenceStates& seqs, const Tensor& out) {
  if (out.dtype() != x.dtype()) {
    return absl::UnimplementedError(absl::StrCat("CausalConv1d: CUDA kernel writes out in x's dtype ",
                                                 DTypeName(x.dtype()), ", got ", DTypeName(out.dtype())));
  }
  if (conv_state.dtype() != DType::kF32) {
    return absl::UnimplementedError(
        absl::StrCat("CausalConv1d: CUDA kernel keeps conv_state in f32, got ", DTypeName(conv_state.dtype())));
  }
  if (bias.defined() && bias.dtype() != weight.dtype()) {
    return absl::UnimplementedError("CausalConv1d: CUDA kernel takes bias in weight's dtype");
  }
  const int64_t n = seqs.state_slots.dim(0);
  if (n == 0 && x.dim(0) == 0) return absl::OkStatus();
  if (n == 0) return absl::InvalidArgumentError("query_start: rows without any sequence");
  SEAM_RETURN_IF_ERROR(CheckCurrentDevice(x, "CausalConv1d"));
  const ConvParams p{x.raw_data(), weight.raw_data(), bias.defined() ? bias.raw_data() : nullptr,
                     conv_state.data<float>(), out.raw_data(), seqs.query_start.data<int32_t>(),
                     seqs.state_slots.data<int32_t>(), x.dim(0), x.dim(1), n, conv_state.dim(0),
                     static_cast<int>(weight.dim(1)), silu};
  const cudaStream_t stream = Stream();
  return DispatchFloat(x.dtype(), "x", [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    return DispatchSameOrF32<T>(weight.dtype(), "weight", [&](auto wtag) -> absl::Status {
      using W = typename decltype(wtag)::type;
      if (p.tokens > 0) {
        ConvOutKernel<T, W><<<GridFor(p.tokens * p.channels, kThreads), kThreads, 0, stream>>>(p);
        SEAM_CUDA_RETURN_IF_ERROR(cudaGetLastError());
      }
      if (p.k > 1 && p.num_slots > 0) {
        ConvStateKernel<T><<<GridFor(p.seqs * p.channels, kThreads), kThreads, 0, stream>>>(p);
        SEAM_CUDA_RETURN_IF_ERROR(cudaGetLastError());
      }
      return absl::OkStatus();
    });
  });
}

}  // namespace seam::kernels::cuda
