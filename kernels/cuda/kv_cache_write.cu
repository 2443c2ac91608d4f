// WriteKvCache on CUDA: one thread block per token row copies the row of k
// (and of v) into its paged-cache slot in 16-byte vectors, converting between
// the k/v dtype and the cache dtype. Negative slots (padding) and slots past
// the cache are skipped on the device, so nothing is checked on the host.
#include "cuda_common.cuh"
#include "cuda_ops.h"
#include "pdl_launch.cuh"

namespace seam::kernels::cuda {
namespace {

// Block t copies row t of src into the cache row slots[t]; negative slots
// (padding) and slots past the cache are skipped.
template <typename TS, typename TD, int VEC>
__global__ void WriteCacheKernel(const TS* __restrict__ src, const int32_t* __restrict__ slots, TD* __restrict__ cache,
                                 int64_t num_slots, int row_elems) {
  PdlWait();  // before any read or write, in every block (pdl_launch.cuh)
  PdlLaunchDependents();
  const int64_t t = blockIdx.x;
  const int32_t slot = slots[t];
  if (slot < 0 || slot >= num_slots) return;
  const TS* in = src + t * row_elems;
  TD* dst = cache + static_cast<int64_t>(slot) * row_elems;
  for (int i = threadIdx.x * VEC; i < row_elems; i += blockDim.x * VEC) {
    float f[VEC];
    LoadFloats<TS, VEC>(in + i, f);
    StoreFloats<TD, VEC>(dst + i, f);
  }
}

template <typename TS, typename TD>
absl::Status LaunchWriteCache(const Tensor& src, const Tensor& slots, const Tensor& cache, cudaStream_t stream) {
  const int64_t rows = src.dim(0);
  const int row_elems = static_cast<int>(src.numel() / rows);
  const int64_t num_slots = cache.dim(0) * cache.dim(1);
  constexpr int kVec = VecWidth<TS, TD>();
  const bool vectorized =
      row_elems % kVec == 0 && VecAligned<TS>(src.raw_data(), kVec) && VecAligned<TD>(cache.raw_data(), kVec);
  const int vec = vectorized ? kVec : 1;
  const int vectors = row_elems / vec;
  const int threads = vectors >= 256 ? 256 : (vectors + 31) / 32 * 32;
  const auto* s = static_cast<const TS*>(src.raw_data());
  auto* d = static_cast<TD*>(cache.raw_data());
  const int32_t* sl = slots.data<int32_t>();
  const auto grid = static_cast<unsigned int>(rows);
  const LaunchShape shape{dim3(grid), dim3(threads), 0, stream};
  if (vectorized) return LaunchEnrolled(shape, WriteCacheKernel<TS, TD, kVec>, s, sl, d, num_slots, row_elems);
  return LaunchEnrolled(shape, WriteCacheKernel<TS, TD, 1>, s, sl, d, num_slots, row_elems);
}

absl::Status WriteOne(const Tensor& src, const Tensor& slots, const Tensor& cache, cudaStream_t stream,
                      const char* src_name) {
  return DispatchFloat(src.dtype(), src_name, [&](auto s_tag) -> absl::Status {
    using TS = typename decltype(s_tag)::type;
    return DispatchFloat(cache.dtype(), "cache", [&](auto d_tag) -> absl::Status {
      using TD = typename decltype(d_tag)::type;
      return LaunchWriteCache<TS, TD>(src, slots, cache, stream);
    });
  });
}

}  // namespace

absl::Status WriteKvCache(const Tensor& k, const Tensor& v, const Tensor& slot_mapping, const Tensor& k_cache,
                          const Tensor& v_cache) {
  if (k.numel() == 0) return absl::OkStatus();
  SEAM_RETURN_IF_ERROR(CheckCurrentDevice(k, "WriteKvCache"));
  if (k.dim(0) > 0x7fffffff) {
    return absl::InvalidArgumentError(absl::StrCat("WriteKvCache: ", k.dim(0), " rows are too many"));
  }
  const cudaStream_t stream = Stream();
  SEAM_RETURN_IF_ERROR(WriteOne(k, slot_mapping, k_cache, stream, "k"));
  return WriteOne(v, slot_mapping, v_cache, stream, "v");
}

}  // namespace seam::kernels::cuda
