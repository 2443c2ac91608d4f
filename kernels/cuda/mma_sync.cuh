// Warp-level tensor-core pieces for bf16 / f16 tiles in shared memory
// (internal to kernels/cuda; sm_80 and later): mma.sync m16n8k16 with fp32
// accumulators, ldmatrix fragment loads (plain and transposed) and cp.async
// copies. Used by the grouped expert GEMM (moe_expert_mma.cu), the
// chunked SSD scan (mamba_chunk_scan.cu) and the attention kernels on
// tensor cores (through mma_fragments.cuh).
//
// Fragment layout of one m16n8k16 (lane l, g = l / 4, q = l % 4):
//   A (16 x 16, row-major):  a[0] = A[g][2q..2q+1]      a[1] = A[g+8][2q..]
//                            a[2] = A[g][2q+8..2q+9]    a[3] = A[g+8][2q+8..]
//   B (16 x 8, k x n):       b[0] = B[2q..2q+1][g]      b[1] = B[2q+8..2q+9][g]
//   C (16 x 8, fp32):        c[0..1] = C[g][2q..2q+1]   c[2..3] = C[g+8][2q..2q+1]
// The loaders below fill these from tiles stored row-major in shared memory
// with a row stride of `ld` elements (a multiple of 8; rows 16-byte aligned).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

namespace seam::kernels::cuda::mma {

__device__ __forceinline__ uint32_t SmemAddress(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// c += a · b for one m16n8k16 tile of T (bf16 or f16), fp32 accumulators.
template <typename T>
__device__ __forceinline__ void Mma16816(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  static_assert(std::is_same_v<T, __nv_bfloat16> || std::is_same_v<T, __half>, "tensor cores take bf16 or f16");
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

// Four 8 x 8 matrices of 16-bit elements; lane l gives the address of row
// l % 8 of matrix l / 8 and receives element [l / 4][2 (l % 4) ..] of each
// (with .trans: element [2 (l % 4) ..][l / 4], i.e. of the transpose).
__device__ __forceinline__ void LdMatrixX4(uint32_t (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(SmemAddress(p))
               : "memory");
}
__device__ __forceinline__ void LdMatrixX4Trans(uint32_t (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(SmemAddress(p))
               : "memory");
}

// The A fragment of the 16 x 16 tile at (row m0, column k0) of a row-major [m][k] tile.
template <typename T>
__device__ __forceinline__ void LoadA(uint32_t (&a)[4], const T* s, int ld, int m0, int k0, int lane) {
  const int row = m0 + (lane % 8) + ((lane / 8) % 2) * 8, col = k0 + (lane / 16) * 8;
  LdMatrixX4(a, s + row * ld + col);
}

// The A fragment of the 16 x 16 tile A[m0.., k0..] where A = Sᵀ for a
// row-major [k][m] tile S (A[m][k] = S[k][m]).
template <typename T>
__device__ __forceinline__ void LoadATrans(uint32_t (&a)[4], const T* s, int ld, int m0, int k0, int lane) {
  const int row = k0 + (lane % 8) + (lane / 16) * 8, col = m0 + ((lane / 8) % 2) * 8;
  LdMatrixX4Trans(a, s + row * ld + col);
}

// The B fragments of two n8 x k16 tiles (columns n0..n0+7 and n0+8..n0+15,
// rows k0..k0+15) of B[k][n] = S[n][k] for a row-major [n][k] tile S:
// b[0], b[1] for columns n0.., b[2], b[3] for columns n0+8...
template <typename T>
__device__ __forceinline__ void LoadBPairNk(uint32_t (&b)[4], const T* s, int ld, int n0, int k0, int lane) {
  const int row = n0 + (lane % 8) + (lane / 16) * 8, col = k0 + ((lane / 8) % 2) * 8;
  LdMatrixX4(b, s + row * ld + col);
}

// The same two tiles of B[k][n] stored row-major as [k][n] (transposed load).
template <typename T>
__device__ __forceinline__ void LoadBPairKn(uint32_t (&b)[4], const T* s, int ld, int n0, int k0, int lane) {
  const int row = k0 + (lane % 8) + ((lane / 8) % 2) * 8, col = n0 + (lane / 16) * 8;
  LdMatrixX4Trans(b, s + row * ld + col);
}

// 16 bytes from global to shared memory without a register round trip;
// writes zeros (reading nothing) when !valid. `global` must be a valid
// address even then.
__device__ __forceinline__ void CpAsync16(void* smem, const void* global, bool valid) {
  const int bytes = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(SmemAddress(smem)), "l"(global), "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void CpAsyncCommit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
// Waits until at most N of this thread's committed groups are still in flight.
template <int N>
__device__ __forceinline__ void CpAsyncWait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

// Two values rounded to T and packed as one 32-bit fragment register (lo first).
template <typename T>
__device__ __forceinline__ uint32_t PackPair(float lo, float hi) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&v);
  } else {
    const __half2 v = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&v);
  }
}

}  // namespace seam::kernels::cuda::mma
