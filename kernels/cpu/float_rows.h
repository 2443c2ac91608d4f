// Moving runs of elements between storage dtypes and fp32 working buffers,
// with the dtype switch hoisted out of the element loop. Every CPU kernel
// reads its inputs through LoadFloats and rounds its outputs once through
// StoreFloats.
#pragma once

#include <cstdint>
#include <cstring>

#include "seam/core/dtype.h"

namespace seam::kernels::cpu {

// dst[0, n) = elements [offset, offset + n) of `base` (dtype `dtype`) as fp32.
inline void LoadFloats(const void* base, DType dtype, int64_t offset, int64_t n, float* dst) {
  switch (dtype) {
    case DType::kF32:
      if (n > 0) std::memcpy(dst, static_cast<const float*>(base) + offset, n * sizeof(float));
      return;
    case DType::kBF16: {
      const uint16_t* src = static_cast<const uint16_t*>(base) + offset;
      for (int64_t i = 0; i < n; ++i) dst[i] = BF16ToFloat(src[i]);
      return;
    }
    case DType::kF16: {
      const uint16_t* src = static_cast<const uint16_t*>(base) + offset;
      for (int64_t i = 0; i < n; ++i) dst[i] = F16ToFloat(src[i]);
      return;
    }
    default:
      for (int64_t i = 0; i < n; ++i) dst[i] = LoadAsFloat(base, dtype, offset + i);
  }
}

// Elements [offset, offset + n) of `base` = src[0, n) rounded to `dtype`.
inline void StoreFloats(const float* src, int64_t n, void* base, DType dtype, int64_t offset) {
  switch (dtype) {
    case DType::kF32:
      if (n > 0) std::memmove(static_cast<float*>(base) + offset, src, n * sizeof(float));
      return;
    case DType::kBF16: {
      uint16_t* dst = static_cast<uint16_t*>(base) + offset;
      for (int64_t i = 0; i < n; ++i) dst[i] = FloatToBF16(src[i]);
      return;
    }
    case DType::kF16: {
      uint16_t* dst = static_cast<uint16_t*>(base) + offset;
      for (int64_t i = 0; i < n; ++i) dst[i] = FloatToF16(src[i]);
      return;
    }
    default:
      for (int64_t i = 0; i < n; ++i) StoreFromFloat(base, dtype, offset + i, src[i]);
  }
}

// Sum of squares in fp32 over eight interleaved partial sums (vectorisable,
// and closer to the exact sum than one running total).
inline float SumOfSquares(const float* x, int64_t n) {
  float lane[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int j = 0; j < 8; ++j) lane[j] += x[i + j] * x[i + j];
  }
  for (; i < n; ++i) lane[i & 7] += x[i] * x[i];
  return ((lane[0] + lane[4]) + (lane[1] + lane[5])) + ((lane[2] + lane[6]) + (lane[3] + lane[7]));
}

// Dot product in fp32, same summation shape as SumOfSquares.
inline float Dot(const float* a, const float* b, int64_t n) {
  float lane[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int j = 0; j < 8; ++j) lane[j] += a[i + j] * b[i + j];
  }
  for (; i < n; ++i) lane[i & 7] += a[i] * b[i];
  return ((lane[0] + lane[4]) + (lane[1] + lane[5])) + ((lane[2] + lane[6]) + (lane[3] + lane[7]));
}

}  // namespace seam::kernels::cpu
