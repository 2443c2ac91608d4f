// Mixture-of-experts routing and row movement on the CPU: the router's
// softmax + top-k (+ renormalisation, or a choice bias and a scaling),
// gathering the rows routed to an
// expert and adding its weighted output back (the expert finalize).
#include <algorithm>
#include <cstring>
#include <cmath>
#include <numeric>
#include <vector>

#include "cpu/cpu_ops.h"
#include "absl/strings/str_cat.h"
#include "cpu/float_rows.h"

namespace seam::kernels::cpu {

namespace {

// MoeRoute and MoeRouteBiased: p = softmax(row); the top_k experts by
// p + bias (bias null: p alone; ties to the lower index); each weight p / the
// kept sum (renormalize) or p · scaling.
void Route(const Tensor& logits, const float* bias, int64_t top_k, bool renormalize, float scaling,
           const Tensor& weights, const Tensor& ids) {
  const int64_t rows = logits.dim(0), n = logits.dim(1);
  std::vector<float> p(n), choice(n);
  std::vector<int32_t> order(n);
  for (int64_t r = 0; r < rows; ++r) {
    LoadFloats(logits.raw_data(), logits.dtype(), r * n, n, p.data());
    const float mx = *std::max_element(p.begin(), p.end());
    float sum = 0.0f;
    for (float& v : p) sum += (v = std::exp(v - mx));
    for (float& v : p) v /= sum;
    for (int64_t e = 0; e < n; ++e) choice[e] = bias == nullptr ? p[e] : p[e] + bias[e];
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + top_k, order.end(), [&choice](int32_t a, int32_t b) {
      return choice[a] > choice[b] || (choice[a] == choice[b] && a < b);
    });
    float kept = 0.0f;
    for (int64_t j = 0; j < top_k; ++j) kept += p[order[j]];
    for (int64_t j = 0; j < top_k; ++j) {
      weights.data<float>()[r * top_k + j] = renormalize ? p[order[j]] / kept : p[order[j]] * scaling;
      ids.data<int32_t>()[r * top_k + j] = order[j];
    }
  }
}

}  // namespace

absl::Status MoeRoute(const Tensor& logits, int64_t top_k, bool renormalize, const Tensor& weights,
                      const Tensor& ids) {
  Route(logits, nullptr, top_k, renormalize, 1.0f, weights, ids);
  return absl::OkStatus();
}

absl::Status MoeRouteBiased(const Tensor& logits, const Tensor& bias, int64_t top_k, float scaling,
                            const Tensor& weights, const Tensor& ids) {
  Route(logits, bias.data<float>(), top_k, false, scaling, weights, ids);
  return absl::OkStatus();
}

absl::Status GatherRows(const Tensor& x, const Tensor& rows, const Tensor& out) {
  const int64_t m = rows.dim(0), n = x.dim(0);
  const size_t row_bytes = static_cast<size_t>(x.dim(1)) * DTypeSize(x.dtype());
  const int32_t* r = rows.data<int32_t>();
  for (int64_t i = 0; i < m; ++i) {
    if (r[i] < 0 || r[i] >= n) {
      return absl::InvalidArgumentError(
          absl::StrCat("rows[", i, "] = ", r[i], " is outside the ", n, " rows of x"));
    }
    std::memcpy(static_cast<char*>(out.raw_data()) + i * row_bytes,
                static_cast<const char*>(x.raw_data()) + r[i] * row_bytes, row_bytes);
  }
  return absl::OkStatus();
}

absl::Status ScatterAddRows(const Tensor& dst, const Tensor& src, const Tensor& rows, const Tensor& weights) {
  const int64_t m = rows.dim(0), n = dst.dim(0), h = dst.dim(1);
  const int32_t* r = rows.data<int32_t>();
  std::vector<char> seen(static_cast<size_t>(n), 0);
  for (int64_t i = 0; i < m; ++i) {
    if (r[i] < 0 || r[i] >= n) {
      return absl::InvalidArgumentError(
          absl::StrCat("rows[", i, "] = ", r[i], " is outside the ", n, " rows of dst"));
    }
    if (seen[r[i]]++) return absl::InvalidArgumentError(absl::StrCat("rows: row ", r[i], " appears twice"));
  }
  std::vector<float> acc(h), add(h);
  for (int64_t i = 0; i < m; ++i) {
    const float w = weights.data<float>()[i];
    LoadFloats(dst.raw_data(), dst.dtype(), r[i] * h, h, acc.data());
    LoadFloats(src.raw_data(), src.dtype(), i * h, h, add.data());
    for (int64_t c = 0; c < h; ++c) acc[c] += add[c] * w;
    StoreFloats(acc.data(), h, dst.raw_data(), dst.dtype(), r[i] * h);
  }
  return absl::OkStatus();
}

}  // namespace seam::kernels::cpu
