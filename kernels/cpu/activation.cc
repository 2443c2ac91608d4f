// Elementwise ops on the CPU: the gated SiLU of the MLP, the squared ReLU of
// Nemotron-H's MLP and the in-place add of the residual path. fp32 arithmetic, one rounding per output element.
#include <algorithm>
#include <cmath>
#include <vector>

#include "cpu/cpu_ops.h"
#include "cpu/float_rows.h"

namespace seam::kernels::cpu {

absl::Status SiluAndMul(const Tensor& input, const Tensor& out) {
  const int64_t rows = out.dim(0), inter = out.dim(1);
  std::vector<float> gate(inter), up(inter);
  for (int64_t r = 0; r < rows; ++r) {
    LoadFloats(input.raw_data(), input.dtype(), r * 2 * inter, inter, gate.data());
    LoadFloats(input.raw_data(), input.dtype(), r * 2 * inter + inter, inter, up.data());
    for (int64_t i = 0; i < inter; ++i) {
      const float g = gate[i];
      gate[i] = g / (1.0f + std::exp(-g)) * up[i];
    }
    StoreFloats(gate.data(), inter, out.raw_data(), out.dtype(), r * inter);
  }
  return absl::OkStatus();
}

absl::Status ReluSquared(const Tensor& x, const Tensor& out) {
  const int64_t n = x.numel(), chunk = 4096;
  std::vector<float> v(chunk);
  for (int64_t off = 0; off < n; off += chunk) {
    const int64_t len = std::min(chunk, n - off);
    LoadFloats(x.raw_data(), x.dtype(), off, len, v.data());
    for (int64_t i = 0; i < len; ++i) {
      const float r = std::fmax(v[i], 0.0f);
      v[i] = r * r;
    }
    StoreFloats(v.data(), len, out.raw_data(), out.dtype(), off);
  }
  return absl::OkStatus();
}

absl::Status AddInPlace(const Tensor& dst, const Tensor& src) {
  // Chunks of one row (or of 4096 elements for 1-D tensors) bound the buffers.
  const int64_t n = dst.numel();
  const int64_t chunk = dst.rank() >= 2 && dst.row_numel() > 0 ? dst.row_numel() : 4096;
  std::vector<float> a(chunk), b(chunk);
  for (int64_t off = 0; off < n; off += chunk) {
    const int64_t len = std::min(chunk, n - off);
    LoadFloats(dst.raw_data(), dst.dtype(), off, len, a.data());
    LoadFloats(src.raw_data(), src.dtype(), off, len, b.data());
    for (int64_t i = 0; i < len; ++i) a[i] += b[i];
    StoreFloats(a.data(), len, dst.raw_data(), dst.dtype(), off);
  }
  return absl::OkStatus();
}

}  // namespace seam::kernels::cpu
