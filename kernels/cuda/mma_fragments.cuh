// Warp-level tensor-core and async-copy pieces shared by the attention
// kernels on tensor cores (internal to kernels/cuda): mma.sync m16n8k16 with
// fp32 accumulators, ldmatrix fragment loads from shared memory, cp.async
// 16-byte copies from global to shared memory, and packing two 16-bit values
// into one fragment register. T is __nv_bfloat16 or __half throughout.
#pragma once

#include <cstdint>
#include <type_traits>

#include "cuda_common.cuh"

namespace seam::kernels::cuda::attn {

__device__ __forceinline__ uint16_t BitsOf(__nv_bfloat16 v) { return __bfloat16_as_ushort(v); }
__device__ __forceinline__ uint16_t BitsOf(__half v) { return __half_as_ushort(v); }

template <typename T>
__device__ __forceinline__ uint32_t PackPair(T lo, T hi) {
  return static_cast<uint32_t>(BitsOf(lo)) | (static_cast<uint32_t>(BitsOf(hi)) << 16);
}

// c += a b for a 16x16 (row-major) and b 16x8 (column-major) tile, fp32 accumulators.
template <typename T>
__device__ __forceinline__ void Mma16816(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}

// Four 8x8 matrices of 16-bit elements; lane l gives the address of row
// l % 8 of matrix l / 8 and receives row l / 4, elements 2 (l % 4) and
// 2 (l % 4) + 1 of each.
__device__ __forceinline__ void LdMatrixX4(uint32_t (&r)[4], const void* smem_ptr) {
  const auto addr = static_cast<uint32_t>(__cvta_generic_to_shared(smem_ptr));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr)
               : "memory");
}

// The same, each matrix transposed.
__device__ __forceinline__ void LdMatrixX4Trans(uint32_t (&r)[4], const void* smem_ptr) {
  const auto addr = static_cast<uint32_t>(__cvta_generic_to_shared(smem_ptr));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr)
               : "memory");
}

// 16 bytes from global to shared without staging in registers; zeros when !valid.
__device__ __forceinline__ void CpAsync16(void* smem_ptr, const void* global_ptr, bool valid) {
  const auto addr = static_cast<uint32_t>(__cvta_generic_to_shared(smem_ptr));
  const int bytes = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(addr), "l"(global_ptr), "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void CpAsyncCommit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }

// Waits until at most `kPending` of this thread's committed groups are in flight.
template <int kPending>
__device__ __forceinline__ void CpAsyncWait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
}

}  // namespace seam::kernels::cuda::attn
