// HeadMatmul on the CPU: per head, the head's rows of x widened to fp32,
// the head's matrix widened to fp32, one OpenBLAS sgemm, one rounding to
// out's dtype. The same arithmetic as Matmul on the head's slice.
#include <cblas.h>

#include <algorithm>
#include <vector>

#include "cpu/cpu_ops.h"
#include "cpu/float_rows.h"

namespace seam::kernels::cpu {

absl::Status HeadMatmul(const Tensor& x, const Tensor& w, const Tensor& out) {
  const int64_t t = x.dim(0), heads = x.dim(1), k = x.dim(2), n = w.dim(1);
  if (t == 0 || heads == 0 || n == 0) return absl::OkStatus();
  const int64_t xs0 = x.strides()[0], xs1 = x.strides()[1], os0 = out.strides()[0], os1 = out.strides()[1];
  std::vector<float> xf(t * k), wf(n * k), cf(t * n, 0.0f);
  for (int64_t h = 0; h < heads; ++h) {
    if (k > 0) {
      for (int64_t r = 0; r < t; ++r) LoadFloats(x.raw_data(), x.dtype(), r * xs0 + h * xs1, k, xf.data() + r * k);
      LoadFloats(w.raw_data(), w.dtype(), h * n * k, n * k, wf.data());
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<blasint>(t), static_cast<blasint>(n),
                  static_cast<blasint>(k), 1.0f, xf.data(), static_cast<blasint>(k), wf.data(),
                  static_cast<blasint>(k), 0.0f, cf.data(), static_cast<blasint>(n));
    }
    for (int64_t r = 0; r < t; ++r) StoreFloats(cf.data() + r * n, n, out.raw_data(), out.dtype(), r * os0 + h * os1);
  }
  return absl::OkStatus();
}

}  // namespace seam::kernels::cpu
