// Row-wise softmax, argmax and seeded sampling on the CPU. Sampling follows
// ops.h: temperature, then top-k, then the top-p nucleus over the kept tokens,
// then one inverse-CDF draw over the kept tokens in descending-probability
// order (ties to the lower index) with u = SampleUniform(seed, step).
#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "cpu/cpu_ops.h"
#include "cpu/float_rows.h"

namespace seam::kernels::cpu {
namespace {

// Index of the first largest value of row[0, n).
int32_t ArgmaxRow(const float* row, int64_t n) {
  int64_t best = 0;
  for (int64_t i = 1; i < n; ++i) {
    if (row[i] > row[best]) best = i;
  }
  return static_cast<int32_t>(best);
}

// Draws one token of a row of logits (already widened to fp32, modified in place).
int32_t SampleRow(std::vector<float>& p, const SamplingParams& params, float u, std::vector<int32_t>& order) {
  const int64_t n = static_cast<int64_t>(p.size());
  const float max_logit = *std::max_element(p.begin(), p.end()) / params.temperature;
  for (float& v : p) v = std::exp(v / params.temperature - max_logit);

  const int64_t kept = params.top_k > 0 ? std::min<int64_t>(params.top_k, n) : n;
  order.resize(n);
  std::iota(order.begin(), order.end(), 0);
  auto higher = [&p](int32_t a, int32_t b) { return p[a] > p[b] || (p[a] == p[b] && a < b); };
  std::partial_sort(order.begin(), order.begin() + kept, order.end(), higher);

  float total = 0.0f;
  for (int64_t j = 0; j < kept; ++j) total += p[order[j]];
  // The nucleus: the shortest prefix whose mass reaches top_p of the kept mass.
  const float target = params.top_p * total;
  float mass = 0.0f;
  int64_t nucleus = 0;
  while (nucleus < kept) {
    mass += p[order[nucleus++]];
    if (mass >= target) break;
  }
  const float threshold = u * mass;
  float cum = 0.0f;
  for (int64_t j = 0; j < nucleus; ++j) {
    cum += p[order[j]];
    if (threshold < cum) return order[j];
  }
  return order[nucleus - 1];
}

}  // namespace

absl::Status Softmax(const Tensor& x, const Tensor& out) {
  const int64_t rows = x.dim(0), n = x.dim(1);
  std::vector<float> row(n);
  for (int64_t r = 0; r < rows; ++r) {
    if (n == 0) break;
    LoadFloats(x.raw_data(), x.dtype(), r * n, n, row.data());
    const float max_v = *std::max_element(row.begin(), row.end());
    float sum = 0.0f;
    for (float& v : row) {
      v = std::exp(v - max_v);
      sum += v;
    }
    const float inv = 1.0f / sum;
    for (float& v : row) v *= inv;
    StoreFloats(row.data(), n, out.raw_data(), out.dtype(), r * n);
  }
  return absl::OkStatus();
}

absl::Status Argmax(const Tensor& logits, const Tensor& out) {
  const int64_t rows = logits.dim(0), n = logits.dim(1);
  std::vector<float> row(n);
  for (int64_t r = 0; r < rows; ++r) {
    LoadFloats(logits.raw_data(), logits.dtype(), r * n, n, row.data());
    out.data<int32_t>()[r] = ArgmaxRow(row.data(), n);
  }
  return absl::OkStatus();
}

absl::Status Sample(const Tensor& logits, const SamplingParams& params, const Tensor& steps, const Tensor& out) {
  const int64_t rows = logits.dim(0), n = logits.dim(1);
  std::vector<float> row(n);
  std::vector<int32_t> order;
  for (int64_t r = 0; r < rows; ++r) {
    LoadFloats(logits.raw_data(), logits.dtype(), r * n, n, row.data());
    if (params.temperature <= 0.0f) {
      out.data<int32_t>()[r] = ArgmaxRow(row.data(), n);
      continue;
    }
    const uint64_t step = static_cast<uint64_t>(static_cast<int64_t>(steps.data<int32_t>()[r]));
    const float u = SampleUniform(params.seed, step);
    out.data<int32_t>()[r] = SampleRow(row, params, u, order);
  }
  return absl::OkStatus();
}

}  // namespace seam::kernels::cpu
