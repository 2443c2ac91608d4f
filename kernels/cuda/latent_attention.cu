// WriteLatentCache and PagedLatentAttention on CUDA, matching
// kernels/cpu/latent_attention.cc (fp32 softmax with max subtraction, fp32
// accumulation, one rounding of the output).
//
// Design, as for PagedAttention (attention.cu): grid sizes depend on shapes
// only, no launcher synchronises or allocates inside a capture, so every
// launch can be captured in a CUDA graph; index values the host cannot check
// without a sync are made harmless on the device (a slot past the cache is
// skipped, a block id outside the cache reads as a zero row, a context longer
// than the block table is cut to the table).
//
//  * WriteLatentCache: one thread block per token row, 16-byte vectors,
//    converting between the latent's dtype and the cache's.
//  * bf16 q and cache with Dc 512 and Dr 64 (DeepSeek-V2/V3, LongCat-Flash):
//    the tensor-core kernel of latent_attention_mma.cu, which loads each
//    cache row once for up to 64 (query row, head) pairs and splits long
//    contexts over thread blocks; decode, prefill and chunked prefill alike.
//  * Everything else (f32, mixed dtypes, other widths): the fp32 CUDA-core
//    kernel of latent_attention_simple.cu.
#include "latent_attention.cuh"
#include "latent_ops.h"

namespace seam::kernels::cuda {
namespace {

template <typename TS, typename TD, int VEC>
__global__ void WriteLatentKernel(const TS* __restrict__ src, const int32_t* __restrict__ slots,
                                  TD* __restrict__ cache, int64_t num_slots, int width) {
  const int64_t t = blockIdx.x;
  const int32_t slot = slots[t];
  if (slot < 0 || slot >= num_slots) return;
  const TS* in = src + t * width;
  TD* dst = cache + static_cast<int64_t>(slot) * width;
  for (int i = threadIdx.x * VEC; i < width; i += blockDim.x * VEC) {
    float f[VEC];
    LoadFloats<TS, VEC>(in + i, f);
    StoreFloats<TD, VEC>(dst + i, f);
  }
}

template <typename TS, typename TD>
absl::Status LaunchWriteLatent(const Tensor& latent, const Tensor& slots, const Tensor& cache, cudaStream_t stream) {
  const int width = static_cast<int>(latent.dim(1));
  const int64_t num_slots = cache.dim(0) * cache.dim(1);
  constexpr int kVec = VecWidth<TS, TD>();
  const bool vectorized =
      width % kVec == 0 && VecAligned<TS>(latent.raw_data(), kVec) && VecAligned<TD>(cache.raw_data(), kVec);
  const int vectors = width / (vectorized ? kVec : 1);
  const int threads = vectors >= 256 ? 256 : (vectors + 31) / 32 * 32;
  const auto* s = static_cast<const TS*>(latent.raw_data());
  auto* d = static_cast<TD*>(cache.raw_data());
  const auto grid = static_cast<unsigned int>(latent.dim(0));
  if (vectorized) {
    WriteLatentKernel<TS, TD, kVec><<<grid, threads, 0, stream>>>(s, slots.data<int32_t>(), d, num_slots, width);
  } else {
    WriteLatentKernel<TS, TD, 1><<<grid, threads, 0, stream>>>(s, slots.data<int32_t>(), d, num_slots, width);
  }
  SEAM_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return absl::OkStatus();
}

}  // namespace

absl::Status WriteLatentCache(const Tensor& latent, const Tensor& slot_mapping, const Tensor& latent_cache) {
  if (latent.numel() == 0) return absl::OkStatus();
  SEAM_RETURN_IF_ERROR(CheckCurrentDevice(latent, "WriteLatentCache"));
  if (latent.dim(0) > 0x7fffffff) {
    return absl::InvalidArgumentError(absl::StrCat("WriteLatentCache: ", latent.dim(0), " rows are too many"));
  }
  const cudaStream_t stream = Stream();
  return DispatchFloat(latent.dtype(), "latent", [&](auto s_tag) -> absl::Status {
    using TS = typename decltype(s_tag)::type;
    return DispatchFloat(latent_cache.dtype(), "latent_cache", [&](auto d_tag) -> absl::Status {
      using TD = typename decltype(d_tag)::type;
      return LaunchWriteLatent<TS, TD>(latent, slot_mapping, latent_cache, stream);
    });
  });
}

absl::Status PagedLatentAttention(const Tensor& q, const Tensor& latent_cache, const AttentionBatch& batch,
                                  float scale, const Tensor& out) {
  const int64_t rows = q.dim(0), seqs = batch.context_lens.dim(0);
  if (rows == 0 || seqs == 0 || q.dim(1) == 0) return absl::OkStatus();
  if (rows > 0x7fffffff || q.dim(1) > 65535 || batch.block_tables.dim(1) * latent_cache.dim(1) > 0x7fffffff ||
      latent_cache.dim(0) * latent_cache.dim(1) > 0x7fffffff) {
    return absl::InvalidArgumentError("PagedLatentAttention: batch or cache too large for 32-bit positions");
  }
  SEAM_RETURN_IF_ERROR(CheckCurrentDevice(q, "PagedLatentAttention"));
  mla::LatentParams p{};
  p.q = q.raw_data();
  p.cache = latent_cache.raw_data();
  p.out = out.raw_data();
  p.query_start = batch.query_start.data<int32_t>();
  p.context_lens = batch.context_lens.data<int32_t>();
  p.block_tables = batch.block_tables.data<int32_t>();
  p.q_rows = rows;
  p.num_seqs = static_cast<int>(seqs);
  p.max_blocks = static_cast<int>(batch.block_tables.dim(1));
  p.block_size = static_cast<int>(latent_cache.dim(1));
  p.num_blocks = static_cast<int>(latent_cache.dim(0));
  p.hq = static_cast<int>(q.dim(1));
  p.width = static_cast<int>(q.dim(2));
  p.dc = static_cast<int>(out.dim(2));
  p.scale = scale;
  const cudaStream_t stream = Stream();
  if (q.dtype() == DType::kBF16 && latent_cache.dtype() == DType::kBF16 && mla::LatentMmaApplies(p)) {
    // T == B: a decode step, one row per sequence as a rule (only the kernel's
    // head tiles are sized by it; any batch stays correct).
    return mla::LaunchLatentMma(p, rows == seqs, stream);
  }
  return DispatchFloat(q.dtype(), "q", [&](auto q_tag) -> absl::Status {
    using T = typename decltype(q_tag)::type;
    return DispatchFloat(latent_cache.dtype(), "latent_cache", [&](auto c_tag) -> absl::Status {
      using C = typename decltype(c_tag)::type;
      return mla::LaunchLatentSimple<T, C>(p, stream);
    });
  });
}

}  // namespace seam::kernels::cuda
