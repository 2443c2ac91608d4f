// Rotary position embedding on the CPU, NeoX / Hugging Face rotate_half style:
// feature i of the first half pairs with feature i + rotary_dim/2. The
// frequencies and angles are computed in fp32 the way Hugging Face does.
#include <cmath>
#include <vector>

#include "cpu/cpu_ops.h"
#include "cpu/float_rows.h"

namespace seam::kernels::cpu {
namespace {

// Rotates the first `rotary_dim` features of each of the `heads` heads of row
// `t` of x ([T, heads, D]) in place.
void RotateRow(const Tensor& x, int64_t t, int64_t rotary_dim, const std::vector<float>& cos_a,
               const std::vector<float>& sin_a, std::vector<float>& buf) {
  const int64_t heads = x.dim(1), d = x.dim(2), half = rotary_dim / 2;
  for (int64_t h = 0; h < heads; ++h) {
    const int64_t off = (t * heads + h) * d;
    LoadFloats(x.raw_data(), x.dtype(), off, rotary_dim, buf.data());
    for (int64_t i = 0; i < half; ++i) {
      const float x1 = buf[i], x2 = buf[i + half];
      buf[i] = x1 * cos_a[i] - x2 * sin_a[i];
      buf[i + half] = x2 * cos_a[i] + x1 * sin_a[i];
    }
    StoreFloats(buf.data(), rotary_dim, x.raw_data(), x.dtype(), off);
  }
}

}  // namespace

absl::Status RotaryEmbedding(const Tensor& q, const Tensor& k, const Tensor& positions, float theta,
                             int64_t rotary_dim) {
  const int64_t rows = q.dim(0), half = rotary_dim / 2;
  // inv_freq = 1 / theta^(arange(0, dim, 2) / dim), each step in fp32.
  std::vector<float> inv_freq(half);
  for (int64_t i = 0; i < half; ++i) {
    const float exponent = static_cast<float>(2 * i) / static_cast<float>(rotary_dim);
    inv_freq[i] = 1.0f / std::pow(theta, exponent);
  }
  std::vector<float> cos_a(half), sin_a(half), buf(rotary_dim);
  const int32_t* pos = positions.data<int32_t>();
  for (int64_t t = 0; t < rows; ++t) {
    for (int64_t i = 0; i < half; ++i) {
      const float angle = static_cast<float>(pos[t]) * inv_freq[i];
      cos_a[i] = std::cos(angle);
      sin_a[i] = std::sin(angle);
    }
    RotateRow(q, t, rotary_dim, cos_a, sin_a, buf);
    RotateRow(k, t, rotary_dim, cos_a, sin_a, buf);
  }
  return absl::OkStatus();
}

}  // namespace seam::kernels::cpu
