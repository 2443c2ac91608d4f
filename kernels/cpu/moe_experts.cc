// The device-side expert ops of seam/kernels/moe_experts.h on the CPU: the
// reference the CUDA kernels are tested against (sums in index order, fp32).
#include <algorithm>
#include <cstring>
#include <numeric>
#include <utility>
#include <vector>

#include "cpu/cpu_ops.h"
#include "cpu/float_rows.h"
#include "seam/kernels/moe_experts.h"

namespace seam::kernels::cpu {

absl::Status SortRoutesByExpert(const Tensor& weights, const Tensor& ids) {
  const int64_t rows = ids.dim(0), g = ids.dim(1);
  float* w = weights.data<float>();
  int32_t* e = ids.data<int32_t>();
  std::vector<std::pair<int32_t, float>> row(g);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t j = 0; j < g; ++j) row[j] = {e[r * g + j], w[r * g + j]};
    std::stable_sort(row.begin(), row.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    for (int64_t j = 0; j < g; ++j) std::tie(e[r * g + j], w[r * g + j]) = row[j];
  }
  return absl::OkStatus();
}

absl::Status GroupByExpert(const Tensor& ids, const ExpertGroups& groups) {
  const int64_t experts = groups.experts(), pairs = groups.pairs();
  const int32_t* e = ids.data<int32_t>();
  int32_t* offsets = groups.offsets.data<int32_t>();
  int32_t* order = groups.order.data<int32_t>();
  int32_t* active = groups.active.data<int32_t>();
  std::vector<int32_t> count(experts, 0);
  for (int64_t p = 0; p < pairs; ++p) {
    if (e[p] >= 0 && e[p] < experts) ++count[e[p]];
  }
  int32_t run = 0, used = 0;
  for (int64_t x = 0; x < experts; ++x) {
    offsets[x] = run;
    if (count[x] > 0) active[1 + used++] = static_cast<int32_t>(x);
    run += count[x];
  }
  offsets[experts] = run;
  active[0] = used;
  std::vector<int32_t> cursor(offsets, offsets + experts);
  for (int64_t p = 0; p < pairs; ++p) {  // ascending pair index within an expert
    if (e[p] >= 0 && e[p] < experts) order[cursor[e[p]]++] = static_cast<int32_t>(p);
  }
  return absl::OkStatus();
}

absl::Status ExpertMatmul(const Tensor& x, const Tensor& w, const ExpertGroups& groups, const Tensor& out) {
  const int64_t pairs = groups.pairs(), n = w.dim(1), k = w.dim(2);
  if (pairs == 0) return absl::OkStatus();
  const int64_t per_row = pairs / x.dim(0);
  const int32_t* offsets = groups.offsets.data<int32_t>();
  const int32_t* order = groups.order.data<int32_t>();
  std::vector<float> xr(k), wr(k), acc(n);
  for (int64_t e = 0; e < groups.experts(); ++e) {
    for (int32_t i = offsets[e]; i < offsets[e + 1]; ++i) {
      const int64_t p = order[i];
      LoadFloats(x.raw_data(), x.dtype(), (p / per_row) * k, k, xr.data());
      for (int64_t f = 0; f < n; ++f) {
        LoadFloats(w.raw_data(), w.dtype(), (e * n + f) * k, k, wr.data());
        float s = 0.0f;
        for (int64_t j = 0; j < k; ++j) s += xr[j] * wr[j];
        acc[f] = s;
      }
      StoreFloats(acc.data(), n, out.raw_data(), out.dtype(), p * n);
    }
  }
  return absl::OkStatus();
}

absl::Status GatherPairs(const Tensor& x, const ExpertGroups& groups, const Tensor& out) {
  const int64_t grouped = groups.offsets.data<int32_t>()[groups.experts()];
  if (grouped == 0) return absl::OkStatus();
  const int64_t per_row = groups.pairs() / x.dim(0);
  const size_t row_bytes = static_cast<size_t>(x.dim(1)) * DTypeSize(x.dtype());
  const int32_t* order = groups.order.data<int32_t>();
  for (int64_t i = 0; i < grouped; ++i) {
    std::memcpy(static_cast<char*>(out.raw_data()) + i * row_bytes,
                static_cast<const char*>(x.raw_data()) + (order[i] / per_row) * row_bytes, row_bytes);
  }
  return absl::OkStatus();
}

absl::Status ScatterPairs(const Tensor& src, const ExpertGroups& groups, const Tensor& out) {
  const int64_t grouped = groups.offsets.data<int32_t>()[groups.experts()];
  const size_t row_bytes = static_cast<size_t>(src.dim(1)) * DTypeSize(src.dtype());
  const int32_t* order = groups.order.data<int32_t>();
  for (int64_t i = 0; i < grouped; ++i) {
    std::memcpy(static_cast<char*>(out.raw_data()) + order[i] * row_bytes,
                static_cast<const char*>(src.raw_data()) + i * row_bytes, row_bytes);
  }
  return absl::OkStatus();
}

absl::Status MoeFinalize(const Tensor& expert_out, const Tensor& scales, const Tensor& out) {
  const int64_t rows = expert_out.dim(0), g = expert_out.dim(1), h = expert_out.dim(2);
  const float* s = scales.data<float>();
  std::vector<float> sum(h), e(h);
  for (int64_t r = 0; r < rows; ++r) {
    std::fill(sum.begin(), sum.end(), 0.0f);
    for (int64_t j = 0; j < g; ++j) {
      LoadFloats(expert_out.raw_data(), expert_out.dtype(), (r * g + j) * h, h, e.data());
      for (int64_t c = 0; c < h; ++c) sum[c] += s[r * g + j] * e[c];  // as MoeFinalizeAddRmsNorm
    }
    StoreFloats(sum.data(), h, out.raw_data(), out.dtype(), r * h);
  }
  return absl::OkStatus();
}

}  // namespace seam::kernels::cpu
