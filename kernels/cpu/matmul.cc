// Matmul on the CPU: out[M, N] = x[M, K] · w[N, K]ᵀ through OpenBLAS sgemm.
// Half-precision operands are widened to fp32 first; the weight is widened a
// block of rows at a time so a large bf16 matrix never doubles in memory.
#include <cblas.h>

#include <algorithm>
#include <vector>

#include "cpu/cpu_ops.h"
#include "cpu/float_rows.h"

namespace seam::kernels::cpu {
namespace {

// Weight rows widened per block: about 16 MiB of fp32 at a time.
constexpr int64_t kWeightBlockFloats = int64_t{4} << 20;

// c[M, n] = a[M, K] · b[n, K]ᵀ, all fp32 and row-major with leading dims.
void Gemm(const float* a, int64_t m, int64_t k, const float* b, int64_t n, float* c, int64_t ldc) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<blasint>(m), static_cast<blasint>(n),
              static_cast<blasint>(k), 1.0f, a, static_cast<blasint>(k), b, static_cast<blasint>(k), 0.0f, c,
              static_cast<blasint>(ldc));
}

}  // namespace

absl::Status Matmul(const Tensor& x, const Tensor& w, const Tensor& out) {
  const int64_t m = x.dim(0), k = x.dim(1), n = w.dim(0);
  if (m == 0 || n == 0) return absl::OkStatus();

  std::vector<float> x_wide;
  const float* xf = x.data<float>();
  if (x.dtype() != DType::kF32) {
    x_wide.resize(m * k);
    LoadFloats(x.raw_data(), x.dtype(), 0, m * k, x_wide.data());
    xf = x_wide.data();
  }

  if (k == 0) {  // empty sum: every output is zero
    std::vector<float> zeros(n, 0.0f);
    for (int64_t r = 0; r < m; ++r) StoreFloats(zeros.data(), n, out.raw_data(), out.dtype(), r * n);
    return absl::OkStatus();
  }

  if (w.dtype() == DType::kF32 && out.dtype() == DType::kF32) {
    Gemm(xf, m, k, w.data<float>(), n, out.data<float>(), n);
    return absl::OkStatus();
  }

  const int64_t block = std::clamp<int64_t>(kWeightBlockFloats / k, 1, n);
  std::vector<float> w_block(w.dtype() == DType::kF32 ? 0 : block * k);
  std::vector<float> c_block(m * block);
  for (int64_t n0 = 0; n0 < n; n0 += block) {
    const int64_t nb = std::min(block, n - n0);
    const float* wf = w.data<float>() + n0 * k;
    if (w.dtype() != DType::kF32) {
      LoadFloats(w.raw_data(), w.dtype(), n0 * k, nb * k, w_block.data());
      wf = w_block.data();
    }
    Gemm(xf, m, k, wf, nb, c_block.data(), nb);
    for (int64_t r = 0; r < m; ++r) {
      StoreFloats(c_block.data() + r * nb, nb, out.raw_data(), out.dtype(), r * n + n0);
    }
  }
  return absl::OkStatus();
}

}  // namespace seam::kernels::cpu
