// RMSNorm and the fused residual add + RMSNorm on the CPU. Each row is
// widened to fp32, normalised as x · rsqrt(mean(x²) + eps) · w (the order
// Hugging Face multiplies in), and rounded once into the output.
#include <algorithm>
#include <cmath>
#include <vector>

#include "cpu/cpu_ops.h"
#include "cpu/float_rows.h"

namespace seam::kernels::cpu {
namespace {

// row ← row · rsqrt(mean(row²) + eps) · w, all fp32.
void NormaliseRow(float* row, const float* w, int64_t h, float eps) {
  const float mean_sq = SumOfSquares(row, h) / static_cast<float>(h);
  const float inv_rms = 1.0f / std::sqrt(mean_sq + eps);
  for (int64_t i = 0; i < h; ++i) row[i] = (row[i] * inv_rms) * w[i];
}

}  // namespace

absl::Status RmsNorm(const Tensor& x, const Tensor& weight, float eps, const Tensor& out) {
  const int64_t rows = x.dim(0), h = x.dim(1);
  std::vector<float> w(h), row(h);
  LoadFloats(weight.raw_data(), weight.dtype(), 0, h, w.data());
  for (int64_t r = 0; r < rows; ++r) {
    LoadFloats(x.raw_data(), x.dtype(), r * h, h, row.data());
    NormaliseRow(row.data(), w.data(), h, eps);
    StoreFloats(row.data(), h, out.raw_data(), out.dtype(), r * h);
  }
  return absl::OkStatus();
}

absl::Status FusedAddRmsNorm(const Tensor& x, const Tensor& residual, const Tensor& weight, float eps,
                             const Tensor& out) {
  const int64_t rows = x.dim(0), h = x.dim(1);
  std::vector<float> w(h), sum(h), res(h);
  LoadFloats(weight.raw_data(), weight.dtype(), 0, h, w.data());
  for (int64_t r = 0; r < rows; ++r) {
    // The whole row of x is read before `out` (which may alias x) is written.
    LoadFloats(x.raw_data(), x.dtype(), r * h, h, sum.data());
    LoadFloats(residual.raw_data(), residual.dtype(), r * h, h, res.data());
    for (int64_t i = 0; i < h; ++i) sum[i] += res[i];
    StoreFloats(sum.data(), h, residual.raw_data(), residual.dtype(), r * h);
    NormaliseRow(sum.data(), w.data(), h, eps);
    StoreFloats(sum.data(), h, out.raw_data(), out.dtype(), r * h);
  }
  return absl::OkStatus();
}

absl::Status MoeFinalizeAddRmsNorm(const Tensor& expert_out, const Tensor& scales, const Tensor& residual,
                                   const Tensor& weight, float eps, const Tensor& out) {
  const int64_t rows = expert_out.dim(0), k = expert_out.dim(1), h = expert_out.dim(2);
  std::vector<float> w(h), sum(h), e(h), res(h), sc(k);
  LoadFloats(weight.raw_data(), weight.dtype(), 0, h, w.data());
  for (int64_t r = 0; r < rows; ++r) {
    LoadFloats(scales.raw_data(), scales.dtype(), r * k, k, sc.data());
    std::fill(sum.begin(), sum.end(), 0.0f);
    for (int64_t j = 0; j < k; ++j) {
      LoadFloats(expert_out.raw_data(), expert_out.dtype(), (r * k + j) * h, h, e.data());
      for (int64_t i = 0; i < h; ++i) sum[i] += sc[j] * e[i];
    }
    LoadFloats(residual.raw_data(), residual.dtype(), r * h, h, res.data());
    for (int64_t i = 0; i < h; ++i) sum[i] += res[i];
    StoreFloats(sum.data(), h, residual.raw_data(), residual.dtype(), r * h);
    NormaliseRow(sum.data(), w.data(), h, eps);
    StoreFloats(sum.data(), h, out.raw_data(), out.dtype(), r * h);
  }
  return absl::OkStatus();
}

}  // namespace seam::kernels::cpu

namespace seam::kernels::cpu {

absl::Status GatedRmsNorm(const Tensor& x, const Tensor& z, const Tensor& weight, int64_t group_size, float eps,
                          const Tensor& out) {
  const int64_t rows = x.dim(0), width = x.dim(1);
  std::vector<float> w(width), row(width), gate(width);
  LoadFloats(weight.raw_data(), weight.dtype(), 0, width, w.data());
  for (int64_t r = 0; r < rows; ++r) {
    LoadFloats(x.raw_data(), x.dtype(), r * width, width, row.data());
    LoadFloats(z.raw_data(), z.dtype(), r * width, width, gate.data());
    for (int64_t i = 0; i < width; ++i) row[i] *= gate[i] / (1.0f + std::exp(-gate[i]));
    for (int64_t g = 0; g < width; g += group_size) {
      const float mean_sq = SumOfSquares(row.data() + g, group_size) / static_cast<float>(group_size);
      const float inv_rms = 1.0f / std::sqrt(mean_sq + eps);
      for (int64_t i = g; i < g + group_size; ++i) row[i] = w[i] * (row[i] * inv_rms);
    }
    StoreFloats(row.data(), width, out.raw_data(), out.dtype(), r * width);
  }
  return absl::OkStatus();
}

}  // namespace seam::kernels::cpu
