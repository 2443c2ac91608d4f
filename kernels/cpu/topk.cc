// Row-wise top-k on the CPU: the k largest values of each row in descending
// order, ties going to the lower index (a stable, deterministic order).
#include <algorithm>
#include <numeric>
#include <vector>

#include "cpu/cpu_ops.h"
#include "cpu/float_rows.h"

namespace seam::kernels::cpu {

absl::Status TopK(const Tensor& x, int64_t k, const Tensor& values, const Tensor& indices) {
  const int64_t rows = x.dim(0), n = x.dim(1);
  std::vector<float> row(n);
  std::vector<int32_t> order(n);
  for (int64_t r = 0; r < rows; ++r) {
    LoadFloats(x.raw_data(), x.dtype(), r * n, n, row.data());
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + k, order.end(), [&row](int32_t a, int32_t b) {
      return row[a] > row[b] || (row[a] == row[b] && a < b);
    });
    for (int64_t j = 0; j < k; ++j) {
      values.data<float>()[r * k + j] = row[order[j]];
      indices.data<int32_t>()[r * k + j] = order[j];
    }
  }
  return absl::OkStatus();
}

}  // namespace seam::kernels::cpu
