// The device-side expert ops of seam/kernels/moe_experts.h on the CPU: the
// reference the CUDA kernels are tested against (sums in index order, fp32).
#include <algorithm>
#include <cmath>
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
  int32_t* tiles = groups.tile_starts.data<int32_t>();
  tiles[0] = 0;
  for (int32_t a = 0; a < used; ++a) {
    const int32_t count = offsets[active[1 + a] + 1] - offsets[active[1 + a]];
    tiles[a + 1] = tiles[a] + static_cast<int32_t>((count + kExpertTileRows - 1) / kExpertTileRows);
  }
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

namespace {

// v rounded to `dtype` and widened back.
float Rounded(float v, DType dtype) {
  switch (dtype) {
    case DType::kBF16:
      return BF16ToFloat(FloatToBF16(v));
    case DType::kF16:
      return F16ToFloat(FloatToF16(v));
    default:
      return v;
  }
}

// Σ_j a[j] · b[j] in index order.
float PairDot(const float* a, const float* b, int64_t k) {
  float s = 0.0f;
  for (int64_t j = 0; j < k; ++j) s += a[j] * b[j];
  return s;
}

// The rows [begin, end) of group order as fp32: x row row_of(i) for position i.
template <typename RowOf>
std::vector<float> GroupRows(const Tensor& x, int32_t begin, int32_t end, RowOf row_of) {
  const int64_t k = x.dim(1);
  std::vector<float> rows(static_cast<size_t>(end - begin) * k);
  for (int32_t i = begin; i < end; ++i) LoadFloats(x.raw_data(), x.dtype(), row_of(i) * k, k, &rows[(i - begin) * k]);
  return rows;
}

}  // namespace

// Each weight row is widened once per expert and met by every pair of the
// expert; a pair's sums run over K in index order, as ExpertMatmul's.
absl::Status ExpertGateUpSilu(const Tensor& x, const Tensor& w, const ExpertGroups& groups, const Tensor& act) {
  const int64_t pairs = groups.pairs(), inter = w.dim(1) / 2, k = w.dim(2);
  if (pairs == 0) return absl::OkStatus();
  const int64_t per_row = pairs / x.dim(0);
  const int32_t* offsets = groups.offsets.data<int32_t>();
  const int32_t* order = groups.order.data<int32_t>();
  std::vector<float> gate(k), up(k);
  for (int64_t e = 0; e < groups.experts(); ++e) {
    const int32_t begin = offsets[e], end = offsets[e + 1];
    if (begin == end) continue;
    const std::vector<float> rows = GroupRows(x, begin, end, [&](int32_t i) { return order[i] / per_row; });
    std::vector<float> out(static_cast<size_t>(end - begin) * inter);
    for (int64_t j = 0; j < inter; ++j) {
      LoadFloats(w.raw_data(), w.dtype(), (e * 2 * inter + j) * k, k, gate.data());
      LoadFloats(w.raw_data(), w.dtype(), (e * 2 * inter + inter + j) * k, k, up.data());
      for (int32_t i = 0; i < end - begin; ++i) {
        const float g = Rounded(PairDot(&rows[i * k], gate.data(), k), x.dtype());
        const float u = Rounded(PairDot(&rows[i * k], up.data(), k), x.dtype());
        out[i * inter + j] = g / (1.0f + std::exp(-g)) * u;  // SiluAndMul's arithmetic
      }
    }
    StoreFloats(out.data(), (end - begin) * inter, act.raw_data(), act.dtype(), int64_t{begin} * inter);
  }
  return absl::OkStatus();
}

absl::Status ExpertDown(const Tensor& act, const Tensor& w, const ExpertGroups& groups, const Tensor& out) {
  const int64_t n = w.dim(1), k = w.dim(2);
  const int32_t* offsets = groups.offsets.data<int32_t>();
  const int32_t* order = groups.order.data<int32_t>();
  std::vector<float> wr(k);
  for (int64_t e = 0; e < groups.experts(); ++e) {
    const int32_t begin = offsets[e], end = offsets[e + 1];
    if (begin == end) continue;
    const std::vector<float> rows = GroupRows(act, begin, end, [](int32_t i) { return int64_t{i}; });
    std::vector<float> acc(static_cast<size_t>(end - begin) * n);
    for (int64_t f = 0; f < n; ++f) {
      LoadFloats(w.raw_data(), w.dtype(), (e * n + f) * k, k, wr.data());
      for (int32_t i = 0; i < end - begin; ++i) acc[i * n + f] = PairDot(&rows[i * k], wr.data(), k);
    }
    for (int32_t i = begin; i < end; ++i) {
      StoreFloats(&acc[(i - begin) * n], n, out.raw_data(), out.dtype(), int64_t{order[i]} * n);
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

absl::Status IdentityExpertPairs(const Tensor& x, const Tensor& ids, int64_t first, bool copy_input,
                                 const Tensor& out) {
  const int64_t per_row = ids.dim(1), pairs = ids.numel();
  const size_t row_bytes = static_cast<size_t>(x.dim(1)) * DTypeSize(x.dtype());
  const int32_t* e = ids.data<int32_t>();
  for (int64_t p = 0; p < pairs; ++p) {
    if (e[p] < first) continue;
    char* row = static_cast<char*>(out.raw_data()) + p * row_bytes;
    if (copy_input) {
      std::memcpy(row, static_cast<const char*>(x.raw_data()) + (p / per_row) * row_bytes, row_bytes);
    } else {
      std::memset(row, 0, row_bytes);  // +0.0 in every floating dtype
    }
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
