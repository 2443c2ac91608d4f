// Shared pieces of the CUDA launchers (internal to kernels/cuda): mapping a
// storage DType to its device type, fp32 conversions, 16-byte vector
// loads/stores, and the stream/device checks every launcher starts with.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "seam/core/cuda_check.h"
#include "seam/core/dtype.h"
#include "seam/core/status.h"
#include "seam/core/tensor.h"
#include "seam/kernels/stream.h"

namespace seam::kernels::cuda {

// ---- storage types ------------------------------------------------------------

template <typename T>
struct TypeTag {
  using type = T;
};

// Calls fn(TypeTag<T>{}) with T = float, __nv_bfloat16 or __half for the
// floating storage dtypes; other dtypes (fp8, integers) are UNIMPLEMENTED naming `what`.
template <typename Fn>
absl::Status DispatchFloat(DType dtype, const char* what, Fn&& fn) {
  switch (dtype) {
    case DType::kF32:
      return fn(TypeTag<float>{});
    case DType::kBF16:
      return fn(TypeTag<__nv_bfloat16>{});
    case DType::kF16:
      return fn(TypeTag<__half>{});
    default:
      return absl::UnimplementedError(
          absl::StrCat(what, ": CUDA kernels take f32, bf16 or f16, got ", DTypeName(dtype)));
  }
}

// The sum and the maximum of v over the 32 lanes of a warp (every lane
// gets it), in the butterfly order of __shfl_xor_sync.
__device__ __forceinline__ float WarpSum(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

__device__ __forceinline__ float WarpMax(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

// Three floating dtypes at once (a matmul's x, w and out): calls
// fn(TypeTag<X>{}, TypeTag<W>{}, TypeTag<O>{}).
template <typename Fn>
absl::Status DispatchFloat3(DType a, const char* a_what, DType b, const char* b_what, DType c, const char* c_what,
                            Fn&& fn) {
  return DispatchFloat(a, a_what, [&](auto at) {
    return DispatchFloat(b, b_what, [&](auto bt) {
      return DispatchFloat(c, c_what, [&](auto ct) { return fn(at, bt, ct); });
    });
  });
}

// The DType a device storage type stands for.
template <typename T>
constexpr DType DTypeOf();
template <>
constexpr DType DTypeOf<float>() { return DType::kF32; }
template <>
constexpr DType DTypeOf<__nv_bfloat16>() { return DType::kBF16; }
template <>
constexpr DType DTypeOf<__half>() { return DType::kF16; }

// For a companion tensor (weight, residual, source) whose dtype may be the
// activation's own T or f32: calls fn(TypeTag<T>{}) or fn(TypeTag<float>{});
// any other pairing is UNIMPLEMENTED naming `what`.
template <typename T, typename Fn>
absl::Status DispatchSameOrF32(DType dtype, const char* what, Fn&& fn) {
  if (dtype == DTypeOf<T>()) return fn(TypeTag<T>{});
  if (dtype == DType::kF32) return fn(TypeTag<float>{});
  return absl::UnimplementedError(absl::StrCat(what, ": CUDA kernels take ", DTypeName(DTypeOf<T>()),
                                               " or f32 here, got ", DTypeName(dtype)));
}

__device__ __forceinline__ float ToFloat(float v) { return v; }
__device__ __forceinline__ float ToFloat(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ float ToFloat(__half v) { return __half2float(v); }

// Rounds to nearest even, like the CPU conversions of seam/core/dtype.h.
template <typename T>
__device__ __forceinline__ T FromFloat(float v);
template <>
__device__ __forceinline__ float FromFloat<float>(float v) { return v; }
template <>
__device__ __forceinline__ __nv_bfloat16 FromFloat<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }
template <>
__device__ __forceinline__ __half FromFloat<__half>(float v) { return __float2half_rn(v); }

// ---- vectors --------------------------------------------------------------------

// N consecutive elements moved as one aligned access (N * sizeof(T) ≤ 16 bytes).
template <typename T, int N>
struct alignas(sizeof(T) * N) Vec {
  static_assert(sizeof(T) * N <= 16 && (sizeof(T) * N & (sizeof(T) * N - 1)) == 0,
                "a vector is one power-of-two access of at most 16 bytes");
  T v[N];
};

// Loads N elements starting at p (aligned to sizeof(T) * N) and widens them to fp32.
template <typename T, int N>
__device__ __forceinline__ void LoadFloats(const T* p, float (&out)[N]) {
  const Vec<T, N> vec = *reinterpret_cast<const Vec<T, N>*>(p);
#pragma unroll
  for (int j = 0; j < N; ++j) out[j] = ToFloat(vec.v[j]);
}

// Rounds N fp32 values once to T and stores them at p (aligned to sizeof(T) * N).
template <typename T, int N>
__device__ __forceinline__ void StoreFloats(T* p, const float (&in)[N]) {
  Vec<T, N> vec;
#pragma unroll
  for (int j = 0; j < N; ++j) vec.v[j] = FromFloat<T>(in[j]);
  *reinterpret_cast<Vec<T, N>*>(p) = vec;
}

// Elements per 16-byte access of the widest of the given types.
template <typename... Ts>
constexpr int VecWidth() {
  size_t widest = 1;
  ((widest = sizeof(Ts) > widest ? sizeof(Ts) : widest), ...);
  return static_cast<int>(16 / widest);
}

// True when p can be accessed as Vec<T, n>.
template <typename T>
inline bool VecAligned(const void* p, int n) {
  return reinterpret_cast<uintptr_t>(p) % (sizeof(T) * static_cast<size_t>(n)) == 0;
}

// Widens the V elements of one 16-byte vector to fp32.
template <typename T>
__device__ __forceinline__ void WidenVec(const uint4& raw, float (&f)[16 / sizeof(T)]);
template <>
__device__ __forceinline__ void WidenVec<float>(const uint4& raw, float (&f)[4]) {
  f[0] = __uint_as_float(raw.x), f[1] = __uint_as_float(raw.y);
  f[2] = __uint_as_float(raw.z), f[3] = __uint_as_float(raw.w);
}
template <>
__device__ __forceinline__ void WidenVec<__nv_bfloat16>(const uint4& raw, float (&f)[8]) {
  const uint32_t words[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
  for (int j = 0; j < 4; ++j) {  // element 2j is the low half (little endian)
    f[2 * j] = __uint_as_float(words[j] << 16);
    f[2 * j + 1] = __uint_as_float(words[j] & 0xffff0000u);
  }
}
template <>
__device__ __forceinline__ void WidenVec<__half>(const uint4& raw, float (&f)[8]) {
  const uint32_t words[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    __half2 h;
    memcpy(&h, &words[j], sizeof(h));
    const float2 v = __half22float2(h);
    f[2 * j] = v.x;
    f[2 * j + 1] = v.y;
  }
}

// The widest of 16, 8, 4, 2 and 1 bytes dividing `row_bytes` and both
// addresses: the unit a copy of whole rows between them may move.
inline int RowCopyUnit(int64_t row_bytes, const void* a, const void* b) {
  for (int unit : {16, 8, 4, 2}) {
    if (row_bytes % unit == 0 && reinterpret_cast<uintptr_t>(a) % unit == 0 &&
        reinterpret_cast<uintptr_t>(b) % unit == 0) {
      return unit;
    }
  }
  return 1;
}

// launch(U{}) with U the unsigned type of RowCopyUnit's width for rows of
// `row_bytes` between `a` and `b` (uint4, uint2, uint32_t, uint16_t; rows
// of whole 2-byte units at least, as every floating dtype's are).
template <typename Launch>
absl::Status LaunchByRowCopyUnit(int64_t row_bytes, const void* a, const void* b, Launch&& launch) {
  switch (RowCopyUnit(row_bytes, a, b)) {
    case 16: return launch(uint4{});
    case 8: return launch(uint2{});
    case 4: return launch(uint32_t{});
    default: return launch(uint16_t{});
  }
}

// ---- launch context -------------------------------------------------------------

inline cudaStream_t Stream() { return static_cast<cudaStream_t>(CurrentStream()); }

// The kernels launch on the calling thread's current device; tensors elsewhere
// are a caller error (FAILED_PRECONDITION), not a silent cross-device access.
inline absl::Status CheckCurrentDevice(const Tensor& t, const char* op) {
  int current = -1;
  SEAM_CUDA_RETURN_IF_ERROR(cudaGetDevice(&current));
  if (!t.device().is_cuda() || t.device().index != current) {
    return absl::FailedPreconditionError(absl::StrCat(op, ": tensors are on ", t.device().ToString(),
                                                      " but the calling thread's CUDA device is ", current));
  }
  return absl::OkStatus();
}

// Blocks of `threads` covering n items, for grid-stride kernels (capped; loops cover the rest).
inline unsigned int GridFor(int64_t n, int threads) {
  const int64_t blocks = (n + threads - 1) / threads;
  return static_cast<unsigned int>(blocks < 65535 * 8 ? (blocks > 0 ? blocks : 1) : 65535 * 8);
}

}  // namespace seam::kernels::cuda
