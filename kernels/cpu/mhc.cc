// CPU reference of the MHC mixes: per row, every stream loaded as fp32, each
// output accumulated with separate multiplies and adds in index order, then
// rounded once.
#include <vector>

#include "cpu/float_rows.h"
#include "cpu/mhc_ops.h"

namespace seam::kernels::cpu {

absl::Status MhcPostMix(const Tensor& residual, const Tensor& y, const std::vector<float>& res,
                        const std::vector<float>& post) {
  const int n = static_cast<int>(post.size());
  const int64_t rows = residual.dim(0), h = y.dim(1);
  std::vector<float> x(n * h), add(h), out(n * h);
  for (int64_t r = 0; r < rows; ++r) {
    LoadFloats(residual.raw_data(), residual.dtype(), r * n * h, n * h, x.data());
    LoadFloats(y.raw_data(), y.dtype(), r * h, h, add.data());
    for (int i = 0; i < n; ++i) {
      for (int64_t k = 0; k < h; ++k) {
        float acc = 0.0f;
        for (int j = 0; j < n; ++j) acc += res[i * n + j] * x[j * h + k];
        acc += post[i] * add[k];
        out[i * h + k] = acc;
      }
    }
    StoreFloats(out.data(), n * h, residual.raw_data(), residual.dtype(), r * n * h);
  }
  return absl::OkStatus();
}

absl::Status MhcPreMix(const Tensor& residual, const std::vector<float>& pre, const Tensor& out) {
  const int n = static_cast<int>(pre.size());
  const int64_t rows = residual.dim(0), h = out.dim(1);
  std::vector<float> x(n * h), mixed(h);
  for (int64_t r = 0; r < rows; ++r) {
    LoadFloats(residual.raw_data(), residual.dtype(), r * n * h, n * h, x.data());
    for (int64_t k = 0; k < h; ++k) {
      float acc = 0.0f;
      for (int i = 0; i < n; ++i) acc += pre[i] * x[i * h + k];
      mixed[k] = acc;
    }
    StoreFloats(mixed.data(), h, out.raw_data(), out.dtype(), r * h);
  }
  return absl::OkStatus();
}

}  // namespace seam::kernels::cpu
