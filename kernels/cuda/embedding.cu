// Embedding lookup on CUDA for a vocab-parallel shard: row t of out is row
// ids[t] - vocab_start of the table, or zeros when the id belongs to another
// shard. One block per token, 16-byte vectors along the row when aligned.
#include "cuda_common.cuh"
#include "cuda_ops.h"
#include "pdl_launch.cuh"

namespace seam::kernels::cuda {
namespace {

constexpr int kThreads = 256;

struct EmbeddingParams {
  const int32_t* ids;  // [tokens]
  const void* table;   // [vocab, hidden], rows vocab_start .. vocab_start + vocab - 1 of the full table
  void* out;           // [tokens, hidden]
  int64_t tokens;
  int64_t vocab;
  int64_t hidden;
  int64_t vocab_start;
};

template <typename S, typename O, int VEC>
__global__ void EmbeddingKernel(const int32_t* ids, const S* table, O* out, int64_t tokens, int64_t vocab,
                                int64_t hidden, int64_t vocab_start) {
  PdlWait();  // the ids may come from the step before (fed decode); every block waits (pdl_launch.cuh)
  PdlLaunchDependents();
  const int64_t nvec = hidden / VEC;
  for (int64_t t = blockIdx.x; t < tokens; t += gridDim.x) {
    const int64_t local = static_cast<int64_t>(ids[t]) - vocab_start;
    const bool inside = local >= 0 && local < vocab;
    const S* src = table + (inside ? local : 0) * hidden;
    O* dst = out + t * hidden;
    for (int64_t v = threadIdx.x; v < nvec; v += blockDim.x) {
      float vals[VEC];
      if (inside) {
        LoadFloats<S, VEC>(src + v * VEC, vals);
      } else {
#pragma unroll
        for (int j = 0; j < VEC; ++j) vals[j] = 0.f;
      }
      StoreFloats<O, VEC>(dst + v * VEC, vals);
    }
  }
}

template <typename S, typename O, int VEC>
absl::Status Launch(const EmbeddingParams& p, cudaStream_t stream) {
  const unsigned int blocks = static_cast<unsigned int>(p.tokens < 65535 * 16 ? p.tokens : 65535 * 16);
  return LaunchEnrolled({dim3(blocks), dim3(kThreads), 0, stream}, EmbeddingKernel<S, O, VEC>, p.ids,
                        static_cast<const S*>(p.table), static_cast<O*>(p.out), p.tokens, p.vocab, p.hidden,
                        p.vocab_start);
}

}  // namespace

absl::Status Embedding(const Tensor& ids, const Tensor& table, int64_t vocab_start, const Tensor& out) {
  if (out.numel() == 0) return absl::OkStatus();
  SEAM_RETURN_IF_ERROR(CheckCurrentDevice(out, "Embedding"));
  const EmbeddingParams p{ids.data<int32_t>(), table.raw_data(), out.raw_data(), ids.numel(),
                          table.dim(0),        out.dim(-1),      vocab_start};
  const cudaStream_t stream = Stream();
  return DispatchFloat(table.dtype(), "table", [&](auto s_tag) -> absl::Status {
    using S = typename decltype(s_tag)::type;
    return DispatchFloat(out.dtype(), "out", [&](auto o_tag) -> absl::Status {
      using O = typename decltype(o_tag)::type;
      constexpr int kVec = VecWidth<S, O>();
      if (p.hidden % kVec == 0 && VecAligned<S>(p.table, kVec) && VecAligned<O>(p.out, kVec)) {
        return Launch<S, O, kVec>(p, stream);
      }
      return Launch<S, O, 1>(p, stream);
    });
  });
}

}  // namespace seam::kernels::cuda
