// Host-side element conversions for reductions: floating tensors are summed
// in fp32 and rounded once, integer tensors are summed as integers. Used by
// the Gloo backend and the in-memory fakes.
#pragma once

#include <cstdint>

#include "seam/core/dtype.h"

namespace seam::comm::internal {

// What a reduction of `dtype` accumulates in.
enum class Accumulator : uint8_t { kF32, kI32, kI64 };
Accumulator AccumulatorOf(DType dtype);
// Bytes of one accumulator element.
size_t AccumulatorSize(Accumulator acc);

// n elements of `dtype` at src → accumulator elements at dst (a copy when they match).
void LoadAccumulator(const void* src, DType dtype, int64_t n, void* dst);
// n accumulator elements at src → `dtype` at dst, rounded once.
void StoreAccumulator(const void* src, DType dtype, int64_t n, void* dst);
// dst[i] += src[i] for n accumulator elements.
void Accumulate(Accumulator acc, const void* src, int64_t n, void* dst);

}  // namespace seam::comm::internal
