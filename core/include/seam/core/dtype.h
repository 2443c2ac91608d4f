// Element types of seam tensors and the scalar conversions between them.
// Storage types are f32, bf16, f16 and fp8 (e4m3); arithmetic is always fp32.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>

#include "absl/status/statusor.h"

namespace seam {

enum class DType : uint8_t { kF32 = 0, kBF16 = 1, kF16 = 2, kF8E4M3 = 3, kI32 = 4, kI64 = 5 };

// Bytes per element.
size_t DTypeSize(DType dtype);
// Lower-case name as used in configs and messages: "f32", "bf16", "f16", "f8e4m3", "i32", "i64".
const char* DTypeName(DType dtype);
// Parses a name (also accepts "float32", "bfloat16", "float16", "int32", "int64").
absl::StatusOr<DType> ParseDType(const std::string& name);
// True for the floating-point storage types.
bool IsFloating(DType dtype);

// bfloat16 <-> float, round to nearest even (NaN preserved).
inline uint16_t FloatToBF16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}
inline float BF16ToFloat(uint16_t h) {
  uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
// IEEE half <-> float, round to nearest even.
uint16_t FloatToF16(float f);
float F16ToFloat(uint16_t h);

// Reads element `i` of a buffer of floating dtype as float.
float LoadAsFloat(const void* data, DType dtype, int64_t i);
// Writes `v` rounded to `dtype` at element `i`.
void StoreFromFloat(void* data, DType dtype, int64_t i, float v);

}  // namespace seam
