// The logit ops around a token choice on the CPU: single-logit edits
// (penalties, logit_bias, masks) in the order ops.h states, and the
// log-probabilities of given tokens (fp32: max, Σ exp in index order, log).
#include <cmath>
#include <limits>
#include <vector>

#include "cpu/cpu_ops.h"
#include "cpu/float_rows.h"

namespace seam::kernels::cpu {

absl::Status EditLogits(const Tensor& logits, const Tensor& at, const Tensor& by) {
  const int64_t rows = logits.dim(0), n = logits.dim(1), edits = at.dim(0);
  float* x = logits.data<float>();
  const int32_t* where = at.data<int32_t>();
  const float* how = by.data<float>();
  for (int64_t e = 0; e < edits; ++e) {
    const int64_t row = where[2 * e], token = where[2 * e + 1];
    if (row < 0 || row >= rows || token < 0 || token >= n) continue;
    float& v = x[row * n + token];
    const float repetition = how[2 * e], offset = how[2 * e + 1];
    if (repetition != 1.0f) v = v > 0.0f ? v / repetition : v * repetition;
    v = v + offset;
  }
  return absl::OkStatus();
}

absl::Status TokenLogProbs(const Tensor& logits, const Tensor& tokens, const Tensor& out) {
  const int64_t rows = logits.dim(0), n = logits.dim(1), k = tokens.dim(1);
  std::vector<float> row(n);
  for (int64_t r = 0; r < rows; ++r) {
    LoadFloats(logits.raw_data(), logits.dtype(), r * n, n, row.data());
    float mx = -std::numeric_limits<float>::infinity();
    for (float v : row) mx = std::fmax(mx, v);
    float sum = 0.0f;
    for (float v : row) sum += std::exp(v - mx);
    const float lse = mx + std::log(sum);
    for (int64_t j = 0; j < k; ++j) {
      const int32_t token = tokens.data<int32_t>()[r * k + j];
      out.data<float>()[r * k + j] =
          token >= 0 && token < n ? row[token] - lse : std::numeric_limits<float>::quiet_NaN();
    }
  }
  return absl::OkStatus();
}

}  // namespace seam::kernels::cpu
