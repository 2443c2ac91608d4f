// Softmax, top-k and seeded sampling on CUDA; one block per row.
//
// Softmax: three passes over the row (max, Σexp, write), fp32 block reductions.
// Argmax lives in argmax.cu (Sample with temperature 0 calls it).
//
// TopK and Sample order a row by a 64-bit composite key
//     key(i) = orderable_bits(value_i) << 32 | (0x7fffffff - i),
// so that descending keys are descending values with ties to the lower index
// (the CPU reference's order), and all keys are distinct. Both are built from
// two block-wide primitives that need no memory beyond shared memory:
//  - FindBoundary: an MSB-first radix search (8-bit digits, shared histograms
//    with integer atomics, so deterministic) for a key K such that the keys in
//    a range [lo, upper) that are ≥ K number exactly c (exact mode) or as many
//    as possible but at most c (chunk mode).
//  - Walk: visits the keys of [lo, upper) in descending order, a chunk of at
//    most kChunk keys at a time: find the chunk boundary, collect the chunk
//    into shared memory, bitonic-sort it, hand it to a visitor.
// TopK = exact boundary of the k-th key, then a walk writing the sorted chunks.
//
// Sample reproduces kernels/cpu/sampling.cc step by step, in the same fp32
// operations, so the same token comes out:
//   p_i = exp(x_i / t - max / t) (division and subtraction in fp32 round to
//   nearest; exp evaluated in double and rounded once, which gives the
//   correctly rounded value, as glibc's expf does);
//   the kept set = top_k keys (exact boundary) or all;
//   total = Σ p over the kept set, summed sequentially in sorted order
//   (one thread walks each sorted chunk), as std::partial_sort + the loop do;
//   nucleus = shortest sorted prefix whose sequential sum reaches top_p·total
//   (a second walk, skipped when top_p·total == total);
//   the draw walks once more to the first prefix sum > u·mass, with
//   u = SampleUniform(seed, step) from the same splitmix64 recipe.
// Work is O(N) per pass with a few passes per chunk; a full-vocabulary draw
// (top_k = 0) takes about ceil(N / kChunk) chunks per walk.
#include <cstdint>

#include "cuda_common.cuh"
#include "cuda_ops.h"
#include "pdl_launch.cuh"

namespace seam::kernels::cuda {
namespace {

constexpr int kThreads = 1024;
constexpr int kWarps = kThreads / 32;
constexpr int kChunk = 16384;  // keys per sorted chunk: 128 KiB of shared memory

// ---- block reductions -------------------------------------------------------------

__device__ __forceinline__ float BlockMax(float v, float* scratch) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  __syncthreads();
  if (threadIdx.x % 32 == 0) scratch[threadIdx.x / 32] = v;
  __syncthreads();
  v = scratch[0];
  for (int w = 1; w < static_cast<int>(blockDim.x / 32); ++w) v = fmaxf(v, scratch[w]);
  return v;
}

__device__ __forceinline__ float BlockSum(float v, float* scratch) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  __syncthreads();
  if (threadIdx.x % 32 == 0) scratch[threadIdx.x / 32] = v;
  __syncthreads();
  v = 0.f;
  for (int w = 0; w < static_cast<int>(blockDim.x / 32); ++w) v += scratch[w];
  return v;
}

// ---- softmax ------------------------------------------------------------------------

template <typename T, typename O>
__global__ void __launch_bounds__(kThreads) SoftmaxKernel(const T* __restrict__ x, O* __restrict__ out, int64_t n) {
  __shared__ float scratch[kWarps];
  PdlWait();  // every block waits before its first read or write (pdl_launch.cuh)
  PdlLaunchDependents();
  const T* in = x + blockIdx.x * n;
  O* o = out + blockIdx.x * n;
  float mx = -INFINITY;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) mx = fmaxf(mx, ToFloat(in[i]));
  mx = BlockMax(mx, scratch);
  float sum = 0.f;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) sum += expf(ToFloat(in[i]) - mx);
  sum = BlockSum(sum, scratch);
  const float inv = 1.0f / sum;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) o[i] = FromFloat<O>(expf(ToFloat(in[i]) - mx) * inv);
}

// ---- composite keys ------------------------------------------------------------------

__device__ __forceinline__ uint32_t OrderedBits(float v) {
  const uint32_t b = __float_as_uint(v);
  return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}
__device__ __forceinline__ float FromOrderedBits(uint32_t o) {
  return __uint_as_float((o & 0x80000000u) ? (o & 0x7fffffffu) : ~o);
}
__device__ __forceinline__ uint64_t MakeKey(float v, int64_t i) {
  return (static_cast<uint64_t>(OrderedBits(v)) << 32) | static_cast<uint64_t>(0x7fffffff - i);
}
__device__ __forceinline__ float KeyValue(uint64_t key) { return FromOrderedBits(static_cast<uint32_t>(key >> 32)); }
__device__ __forceinline__ int32_t KeyIndex(uint64_t key) {
  return static_cast<int32_t>(0x7fffffff - static_cast<int64_t>(key & 0xffffffffu));
}

// Keys in [lo, upper) (upper exclusive; no upper bound when !bounded).
struct KeyRange {
  uint64_t lo = 0;
  uint64_t upper = 0;
  bool bounded = false;
  __device__ bool Contains(uint64_t key) const { return key >= lo && (!bounded || key < upper); }
};

struct Boundary {
  uint64_t key;   // keys ≥ key (inside the range) are selected
  int64_t count;  // how many
};

// Block-wide radix search; see the header. `key_of(i)` gives element i's key.
template <typename KeyOf>
__device__ Boundary FindBoundary(const KeyOf& key_of, int64_t n, KeyRange range, int64_t c, bool exact) {
  __shared__ uint32_t hist[256];
  __shared__ uint64_t s_prefix, s_edge;
  __shared__ int s_shift;
  __shared__ int64_t s_cum;
  __shared__ bool s_done;
  if (threadIdx.x == 0) s_prefix = 0, s_edge = 0, s_shift = 64, s_cum = 0, s_done = false;
  __syncthreads();
  while (true) {
    const uint64_t prefix = s_prefix;
    const int shift = s_shift;
    const int digit = shift - 8;
    for (int b = threadIdx.x; b < 256; b += blockDim.x) hist[b] = 0;
    __syncthreads();
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
      const uint64_t key = key_of(i);
      if (!range.Contains(key)) continue;
      if (shift < 64 && (key >> shift) != prefix) continue;
      atomicAdd(&hist[(key >> digit) & 0xffu], 1u);
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      int64_t cum = s_cum;
      bool done = true;
      for (int b = 255; b >= 0; --b) {
        const int64_t h = hist[b];
        if (h == 0) continue;
        const uint64_t lower = ((prefix << 8) | static_cast<uint64_t>(b)) << digit;
        if (cum + h <= c) {  // the whole bin is taken
          cum += h;
          s_edge = lower;
          if (cum == c) break;
          continue;
        }
        if (!exact && cum > 0) break;  // chunk mode: stop before the bin that overflows
        // Part of this bin is needed: refine inside it.
        s_prefix = (prefix << 8) | static_cast<uint64_t>(b);
        s_shift = digit;
        done = false;
        break;
      }
      s_cum = cum;
      s_done = done;
    }
    __syncthreads();
    if (s_done) break;
  }
  const Boundary result{s_edge, s_cum};
  __syncthreads();  // the shared state is reused by the next call
  return result;
}

// Visits the keys of `range` in descending order, chunk by chunk: visit(buf,
// count, done_before) is called by every thread with the chunk sorted in
// buf[0, count); it returns true (block-uniformly) to stop.
template <typename KeyOf, typename Visit>
__device__ void Walk(const KeyOf& key_of, int64_t n, KeyRange range, uint64_t* buf, Visit&& visit) {
  __shared__ uint32_t s_fill;
  int64_t done = 0;
  while (true) {
    const Boundary b = FindBoundary(key_of, n, range, kChunk, /*exact=*/false);
    if (b.count == 0) return;
    const uint64_t lo = range.lo > b.key ? range.lo : b.key;
    if (threadIdx.x == 0) s_fill = 0;
    __syncthreads();
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
      const uint64_t key = key_of(i);
      if (key >= lo && range.Contains(key)) buf[atomicAdd(&s_fill, 1u)] = key;
    }
    int size = 1;
    while (size < b.count) size <<= 1;
    for (int i = static_cast<int>(b.count) + threadIdx.x; i < size; i += blockDim.x) buf[i] = 0;  // sorts last
    __syncthreads();
    // Bitonic sort, descending.
    for (int k = 2; k <= size; k <<= 1) {
      for (int j = k >> 1; j > 0; j >>= 1) {
        for (int i = threadIdx.x; i < size; i += blockDim.x) {
          const int partner = i ^ j;
          if (partner <= i) continue;
          const uint64_t a = buf[i], z = buf[partner];
          const bool descending = (i & k) == 0;
          if (descending ? a < z : a > z) buf[i] = z, buf[partner] = a;
        }
        __syncthreads();
      }
    }
    if (visit(buf, b.count, done)) return;
    __syncthreads();
    done += b.count;
    range.upper = lo;
    range.bounded = true;
    if (lo == range.lo) return;  // the range is exhausted
  }
}

// ---- top-k ----------------------------------------------------------------------------

template <typename T>
__global__ void __launch_bounds__(kThreads)
    TopKKernel(const T* __restrict__ x, int64_t n, int64_t k, float* __restrict__ values, int32_t* __restrict__ indices) {
  extern __shared__ uint64_t buf[];
  PdlWait();  // every block waits before its first read or write (pdl_launch.cuh)
  PdlLaunchDependents();
  const T* in = x + blockIdx.x * n;
  float* vals = values + blockIdx.x * k;
  int32_t* ids = indices + blockIdx.x * k;
  auto key_of = [in](int64_t i) { return MakeKey(ToFloat(in[i]), i); };
  const Boundary kth = FindBoundary(key_of, n, KeyRange{}, k, /*exact=*/true);
  KeyRange range;
  range.lo = kth.key;
  Walk(key_of, n, range, buf, [&](const uint64_t* sorted, int64_t count, int64_t before) {
    for (int64_t j = threadIdx.x; j < count; j += blockDim.x) {
      vals[before + j] = KeyValue(sorted[j]);
      ids[before + j] = KeyIndex(sorted[j]);
    }
    return false;
  });
}

// ---- sampling ---------------------------------------------------------------------------

__device__ __forceinline__ uint64_t SplitMix64(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// The recipe of SampleUniform in kernels/src/ops_sampling.cc.
__device__ __forceinline__ float DeviceSampleUniform(uint64_t seed, uint64_t step) {
  const uint64_t h = SplitMix64(SplitMix64(seed) ^ step);
  return __fmul_rn(static_cast<float>(h >> 40), 1.0f / 16777216.0f);
}

struct SampleArgs {
  float temperature;
  int64_t top_k;  // 0 = all
  float top_p;
  uint64_t seed;
};

template <typename T>
__global__ void __launch_bounds__(kThreads) SampleKernel(const T* __restrict__ x, int64_t n, SampleArgs args,
                                                         const int32_t* __restrict__ steps, int32_t* __restrict__ out) {
  extern __shared__ uint64_t buf[];
  __shared__ float scratch[kWarps];
  __shared__ float s_sum;
  PdlWait();  // every block waits before its first read or write (pdl_launch.cuh)
  PdlLaunchDependents();

  __shared__ int32_t s_token;
  const int64_t row = blockIdx.x;
  const T* in = x + row * n;

  float mx = -INFINITY;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) mx = fmaxf(mx, ToFloat(in[i]));
  mx = BlockMax(mx, scratch);
  const float t = args.temperature;
  const float max_logit = __fdiv_rn(mx, t);
  auto key_of = [in, t, max_logit](int64_t i) {
    const float z = __fsub_rn(__fdiv_rn(ToFloat(in[i]), t), max_logit);
    return MakeKey(static_cast<float>(exp(static_cast<double>(z))), i);
  };

  KeyRange kept;  // the top_k keys, or all
  if (args.top_k > 0 && args.top_k < n) kept.lo = FindBoundary(key_of, n, KeyRange{}, args.top_k, true).key;

  // Sequential prefix sums over the sorted kept keys, as the CPU loops compute them.
  // Walk 1: total.
  if (threadIdx.x == 0) s_sum = 0.f;
  Walk(key_of, n, kept, buf, [&](const uint64_t* sorted, int64_t count, int64_t) {
    if (threadIdx.x == 0) {
      float sum = s_sum;
      for (int64_t j = 0; j < count; ++j) sum = __fadd_rn(sum, KeyValue(sorted[j]));
      s_sum = sum;
    }
    return false;
  });
  __syncthreads();
  const float total = s_sum;
  const float target = __fmul_rn(args.top_p, total);

  // Walk 2: the nucleus mass, the first prefix sum ≥ target (it is total when target == total).
  float mass = total;
  if (target != total) {
    __syncthreads();
    if (threadIdx.x == 0) s_sum = 0.f;
    __shared__ bool s_stop;
    Walk(key_of, n, kept, buf, [&](const uint64_t* sorted, int64_t count, int64_t) {
      if (threadIdx.x == 0) {
        float sum = s_sum;
        bool stop = false;
        for (int64_t j = 0; j < count && !stop; ++j) {
          sum = __fadd_rn(sum, KeyValue(sorted[j]));
          stop = sum >= target;
        }
        s_sum = sum;
        s_stop = stop;
      }
      __syncthreads();
      return s_stop;
    });
    __syncthreads();
    mass = s_sum;
  }

  // Walk 3: the token, the first prefix sum > u · mass, or the nucleus's last one.
  const uint64_t step = static_cast<uint64_t>(static_cast<int64_t>(steps[row]));
  const float threshold = __fmul_rn(DeviceSampleUniform(args.seed, step), mass);
  __syncthreads();
  if (threadIdx.x == 0) s_sum = 0.f, s_token = -1;
  __shared__ bool s_found;
  Walk(key_of, n, kept, buf, [&](const uint64_t* sorted, int64_t count, int64_t) {
    if (threadIdx.x == 0) {
      float cum = s_sum;
      bool found = false;
      for (int64_t j = 0; j < count && !found; ++j) {
        cum = __fadd_rn(cum, KeyValue(sorted[j]));
        s_token = KeyIndex(sorted[j]);
        found = threshold < cum || cum >= mass;  // the latter: end of the nucleus
      }
      s_sum = cum;
      s_found = found;
    }
    __syncthreads();
    return s_found;
  });
  __syncthreads();
  if (threadIdx.x == 0) out[row] = s_token;
}

// Allows `bytes` of dynamic shared memory for `kernel` (over 48 KiB needs opting in).
template <typename Kernel>
absl::Status AllowSharedMemory(Kernel kernel, size_t bytes) {
  if (bytes <= 48 * 1024) return absl::OkStatus();
  SEAM_CUDA_RETURN_IF_ERROR(
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
  return absl::OkStatus();
}

// Shared bytes of the sorted-chunk buffer for walks over at most `keys` keys.
size_t ChunkBytes(int64_t keys) {
  int64_t size = 1;
  while (size < keys && size < kChunk) size <<= 1;
  return static_cast<size_t>(size) * sizeof(uint64_t);
}

absl::Status CheckRows(const Tensor& x, const char* op) {
  if (x.dim(0) > 0x7fffffff || x.dim(1) >= 0x7fffffff) {
    return absl::UnimplementedError(absl::StrCat(op, ": CUDA kernel takes fewer than 2^31 rows and columns, got ",
                                                 ShapeToString(x.shape())));
  }
  return CheckCurrentDevice(x, op);
}

}  // namespace

absl::Status Softmax(const Tensor& x, const Tensor& out) {
  const int64_t rows = x.dim(0), n = x.dim(1);
  if (rows == 0 || n == 0) return absl::OkStatus();
  SEAM_RETURN_IF_ERROR(CheckRows(x, "Softmax"));
  const cudaStream_t stream = Stream();
  return DispatchFloat(x.dtype(), "x", [&](auto xt) -> absl::Status {
    using T = typename decltype(xt)::type;
    return DispatchFloat(out.dtype(), "out", [&](auto ot) -> absl::Status {
      using O = typename decltype(ot)::type;
      return LaunchEnrolled({dim3(static_cast<unsigned int>(rows)), dim3(kThreads), 0, stream}, SoftmaxKernel<T, O>,
                            static_cast<const T*>(x.raw_data()), static_cast<O*>(out.raw_data()), n);
    });
  });
}

absl::Status Sample(const Tensor& logits, const SamplingParams& params, const Tensor& steps, const Tensor& out) {
  if (params.temperature <= 0.0f) return Argmax(logits, out);
  const int64_t rows = logits.dim(0), n = logits.dim(1);
  if (rows == 0) return absl::OkStatus();
  SEAM_RETURN_IF_ERROR(CheckRows(logits, "Sample"));
  const int64_t kept = params.top_k > 0 && params.top_k < n ? params.top_k : n;
  const size_t shared = ChunkBytes(kept);
  const SampleArgs args{params.temperature, params.top_k, params.top_p, params.seed};
  const cudaStream_t stream = Stream();
  return DispatchFloat(logits.dtype(), "logits", [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    SEAM_RETURN_IF_ERROR(AllowSharedMemory(SampleKernel<T>, shared));
    return LaunchEnrolled({dim3(static_cast<unsigned int>(rows)), dim3(kThreads), shared, stream}, SampleKernel<T>,
                          static_cast<const T*>(logits.raw_data()), n, args, steps.data<int32_t>(),
                          out.data<int32_t>());
  });
}

absl::Status TopK(const Tensor& x, int64_t k, const Tensor& values, const Tensor& indices) {
  const int64_t rows = x.dim(0), n = x.dim(1);
  if (rows == 0 || k == 0) return absl::OkStatus();
  SEAM_RETURN_IF_ERROR(CheckRows(x, "TopK"));
  const size_t shared = ChunkBytes(k);
  const cudaStream_t stream = Stream();
  return DispatchFloat(x.dtype(), "x", [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    SEAM_RETURN_IF_ERROR(AllowSharedMemory(TopKKernel<T>, shared));
    return LaunchEnrolled({dim3(static_cast<unsigned int>(rows)), dim3(kThreads), shared, stream}, TopKKernel<T>,
                          static_cast<const T*>(x.raw_data()), n, k, values.data<float>(), indices.data<int32_t>());
  });
}

}  // namespace seam::kernels::cuda
