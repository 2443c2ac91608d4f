// Host-side reduction conversions (see host_reduce.h).
#include "host_reduce.h"

#include <cstring>

namespace seam::comm::internal {

Accumulator AccumulatorOf(DType dtype) {
  if (dtype == DType::kI32) return Accumulator::kI32;
  if (dtype == DType::kI64) return Accumulator::kI64;
  return Accumulator::kF32;
}

size_t AccumulatorSize(Accumulator acc) { return acc == Accumulator::kI64 ? 8 : 4; }

void LoadAccumulator(const void* src, DType dtype, int64_t n, void* dst) {
  if (dtype == DType::kF32 || dtype == DType::kI32 || dtype == DType::kI64) {
    std::memcpy(dst, src, static_cast<size_t>(n) * DTypeSize(dtype));
    return;
  }
  float* out = static_cast<float*>(dst);
  if (dtype == DType::kBF16) {
    const uint16_t* in = static_cast<const uint16_t*>(src);
    for (int64_t i = 0; i < n; ++i) out[i] = BF16ToFloat(in[i]);
    return;
  }
  for (int64_t i = 0; i < n; ++i) out[i] = LoadAsFloat(src, dtype, i);
}

void StoreAccumulator(const void* src, DType dtype, int64_t n, void* dst) {
  if (dtype == DType::kF32 || dtype == DType::kI32 || dtype == DType::kI64) {
    std::memcpy(dst, src, static_cast<size_t>(n) * DTypeSize(dtype));
    return;
  }
  const float* in = static_cast<const float*>(src);
  if (dtype == DType::kBF16) {
    uint16_t* out = static_cast<uint16_t*>(dst);
    for (int64_t i = 0; i < n; ++i) out[i] = FloatToBF16(in[i]);
    return;
  }
  for (int64_t i = 0; i < n; ++i) StoreFromFloat(dst, dtype, i, in[i]);
}

namespace {
template <typename T>
void AddInto(const void* src, int64_t n, void* dst) {
  const T* in = static_cast<const T*>(src);
  T* out = static_cast<T*>(dst);
  for (int64_t i = 0; i < n; ++i) out[i] += in[i];
}
}  // namespace

void Accumulate(Accumulator acc, const void* src, int64_t n, void* dst) {
  switch (acc) {
    case Accumulator::kF32: return AddInto<float>(src, n, dst);
    case Accumulator::kI32: return AddInto<int32_t>(src, n, dst);
    case Accumulator::kI64: return AddInto<int64_t>(src, n, dst);
  }
}

}  // namespace seam::comm::internal
