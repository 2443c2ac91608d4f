#include "seam/core/dtype.h"

#include <cmath>

#include "seam/core/status.h"

namespace seam {

size_t DTypeSize(DType dtype) {
  switch (dtype) {
    case DType::kF32: return 4;
    case DType::kBF16: return 2;
    case DType::kF16: return 2;
    case DType::kF8E4M3: return 1;
    case DType::kI32: return 4;
    case DType::kI64: return 8;
  }
  SEAM_CHECK_MSG(false, "unknown dtype ", static_cast<int>(dtype));
}

const char* DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kF32: return "f32";
    case DType::kBF16: return "bf16";
    case DType::kF16: return "f16";
    case DType::kF8E4M3: return "f8e4m3";
    case DType::kI32: return "i32";
    case DType::kI64: return "i64";
  }
  return "unknown";
}

absl::StatusOr<DType> ParseDType(const std::string& name) {
  if (name == "f32" || name == "float32" || name == "float") return DType::kF32;
  if (name == "bf16" || name == "bfloat16") return DType::kBF16;
  if (name == "f16" || name == "float16" || name == "half") return DType::kF16;
  if (name == "f8e4m3" || name == "float8_e4m3fn") return DType::kF8E4M3;
  if (name == "i32" || name == "int32") return DType::kI32;
  if (name == "i64" || name == "int64") return DType::kI64;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown dtype '", name, "' (expected f32, bf16, f16, f8e4m3, i32 or i64)"));
}

bool IsFloating(DType dtype) {
  return dtype == DType::kF32 || dtype == DType::kBF16 || dtype == DType::kF16 ||
         dtype == DType::kF8E4M3;
}

uint16_t FloatToF16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t absx = x & 0x7fffffffu;
  if (absx > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);  // NaN
  if (absx >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow -> inf
  if (absx < 0x38800000u) {  // subnormal or zero in half
    // Scale into the subnormal range using float arithmetic (exact rounding by FPU).
    float a;
    std::memcpy(&a, &absx, 4);
    const float scaled = a * 16777216.0f;  // 2^24: half subnormal unit is 2^-24
    const uint32_t m = static_cast<uint32_t>(std::nearbyint(scaled));
    return static_cast<uint16_t>(sign | m);
  }
  uint32_t mant = absx & 0x7fffffu;
  uint32_t exp = (absx >> 23) - 127 + 15;
  uint32_t h = (exp << 10) | (mant >> 13);
  const uint32_t rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;
  return static_cast<uint16_t>(sign | h);
}

float F16ToFloat(uint16_t h) {
  const uint32_t sign = (static_cast<uint32_t>(h) & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  uint32_t out;
  if (exp == 0) {
    const float v = std::ldexp(static_cast<float>(mant), -24);
    std::memcpy(&out, &v, 4);
    out |= sign;
  } else if (exp == 31) {
    out = sign | 0x7f800000u | (mant << 13);
  } else {
    out = sign | ((exp - 15 + 127) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &out, 4);
  return f;
}

namespace {
// fp8 e4m3 (fn variant: no inf, max 448) decode/encode by table search.
float F8E4M3ToFloat(uint8_t v) {
  const int sign = v >> 7, exp = (v >> 3) & 0xf, mant = v & 7;
  if (exp == 15 && mant == 7) return std::nanf("");
  const float mag = exp == 0 ? std::ldexp(static_cast<float>(mant), -9)
                             : std::ldexp(1.0f + mant / 8.0f, exp - 7);
  return sign ? -mag : mag;
}
uint8_t FloatToF8E4M3(float f) {
  if (std::isnan(f)) return 0x7f;
  const uint8_t sign = std::signbit(f) ? 0x80 : 0;
  const float a = std::fmin(std::fabs(f), 448.0f);
  uint8_t best = 0;
  float best_err = INFINITY;
  for (uint8_t c = 0; c < 0x7f; ++c) {  // 0x7f is NaN
    const float err = std::fabs(F8E4M3ToFloat(c) - a);
    if (err < best_err || (err == best_err && (c & 1) == 0)) {
      best = c;
      best_err = err;
    }
  }
  return sign | best;
}
}  // namespace

float LoadAsFloat(const void* data, DType dtype, int64_t i) {
  switch (dtype) {
    case DType::kF32: return static_cast<const float*>(data)[i];
    case DType::kBF16: return BF16ToFloat(static_cast<const uint16_t*>(data)[i]);
    case DType::kF16: return F16ToFloat(static_cast<const uint16_t*>(data)[i]);
    case DType::kF8E4M3: return F8E4M3ToFloat(static_cast<const uint8_t*>(data)[i]);
    case DType::kI32: return static_cast<float>(static_cast<const int32_t*>(data)[i]);
    case DType::kI64: return static_cast<float>(static_cast<const int64_t*>(data)[i]);
  }
  SEAM_CHECK(false);
}

void StoreFromFloat(void* data, DType dtype, int64_t i, float v) {
  switch (dtype) {
    case DType::kF32: static_cast<float*>(data)[i] = v; return;
    case DType::kBF16: static_cast<uint16_t*>(data)[i] = FloatToBF16(v); return;
    case DType::kF16: static_cast<uint16_t*>(data)[i] = FloatToF16(v); return;
    case DType::kF8E4M3: static_cast<uint8_t*>(data)[i] = FloatToF8E4M3(v); return;
    case DType::kI32: static_cast<int32_t*>(data)[i] = static_cast<int32_t>(v); return;
    case DType::kI64: static_cast<int64_t*>(data)[i] = static_cast<int64_t>(v); return;
  }
  SEAM_CHECK(false);
}

}  // namespace seam
