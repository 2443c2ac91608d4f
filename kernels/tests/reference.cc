// Test support for the kernels (see reference.h).
#include "tests/reference.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "absl/strings/str_cat.h"
#include "seam/core/status.h"

namespace seam::kernels::testing {

Tensor RandomTensor(const Shape& shape, DType dtype, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> mag(0.05f, 1.0f);
  std::vector<float> v(NumElements(shape));
  for (float& x : v) x = (rng() & 1 ? 1.0f : -1.0f) * mag(rng);
  return Tensor::FromFloats(v, shape, dtype);
}

std::vector<double> Values(const Tensor& t) {
  const std::vector<float> f = t.ToFloats();
  return std::vector<double>(f.begin(), f.end());
}

std::vector<int32_t> Ints(const Tensor& t) {
  const int32_t* p = t.data<int32_t>();
  return std::vector<int32_t>(p, p + t.numel());
}

double HalfUlp(DType dtype) {
  switch (dtype) {
    case DType::kBF16: return std::ldexp(1.0, -8);
    case DType::kF16: return std::ldexp(1.0, -11);
    default: return std::ldexp(1.0, -24);
  }
}

void ExpectAllClose(const Tensor& got, const std::vector<double>& want, double rel, const std::string& what) {
  const std::vector<double> g = Values(got);
  ASSERT_EQ(g.size(), want.size()) << what;
  double sum_sq = 0.0;
  for (double w : want) sum_sq += w * w;
  const double rms = want.empty() ? 0.0 : std::sqrt(sum_sq / want.size());
  int failures = 0;
  for (size_t i = 0; i < g.size() && failures < 5; ++i) {
    const double bound = rel * std::max(std::fabs(want[i]), rms);
    if (!(std::fabs(g[i] - want[i]) <= bound)) {
      ++failures;
      ADD_FAILURE() << what << "[" << i << "]: got " << g[i] << ", want " << want[i] << " (bound " << bound << ")";
    }
  }
}

std::string DTypeParamName(const ::testing::TestParamInfo<DType>& info) { return DTypeName(info.param); }

PagedFixture::PagedFixture(std::vector<SeqSpec> seqs_in, int hq_in, int hk_in, int head_dim_in,
                           int block_size_in, DType dtype_in, uint64_t seed)
    : seqs(std::move(seqs_in)), hq(hq_in), hk(hk_in), head_dim(head_dim_in), block_size(block_size_in),
      dtype(dtype_in) {
  int total_blocks = 0, total_q = 0;
  for (const SeqSpec& s : seqs) {
    const int used = (s.context + block_size - 1) / block_size;
    total_blocks += used;
    max_blocks = std::max(max_blocks, used + 1);  // a spare column, never read
    total_q += s.q_len;
  }
  const int num_blocks = total_blocks + 3;  // some blocks belong to no sequence
  std::vector<int32_t> ids(num_blocks);
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), std::mt19937_64(seed));
  size_t next = 0;
  for (size_t b = 0; b < seqs.size(); ++b) {
    const int used = (seqs[b].context + block_size - 1) / block_size;
    tables.emplace_back(ids.begin() + next, ids.begin() + next + used);
    next += used;
    keys.push_back(RandomTensor({seqs[b].context, hk, head_dim}, dtype, seed + 10 * b + 1));
    values.push_back(RandomTensor({seqs[b].context, hk, head_dim}, dtype, seed + 10 * b + 2));
  }
  q = RandomTensor({total_q, hq, head_dim}, dtype, seed + 7);
  k_cache = Tensor::Zeros({num_blocks, block_size, hk, head_dim}, dtype);
  v_cache = Tensor::Zeros({num_blocks, block_size, hk, head_dim}, dtype);
}

AttentionBatch PagedFixture::Batch() const {
  std::vector<int32_t> starts{0}, ctx, table(seqs.size() * max_blocks, -1);
  for (size_t b = 0; b < seqs.size(); ++b) {
    starts.push_back(starts.back() + seqs[b].q_len);
    ctx.push_back(seqs[b].context);
    std::copy(tables[b].begin(), tables[b].end(), table.begin() + b * max_blocks);
  }
  const int64_t n = static_cast<int64_t>(seqs.size());
  return AttentionBatch{Tensor::FromInts(starts, {n + 1}), Tensor::FromInts(ctx, {n}),
                        Tensor::FromInts(table, {n, max_blocks})};
}

void PagedFixture::WriteTokens(int b, int from, int to) {
  std::vector<int32_t> slots;
  for (int p = from; p < to; ++p) slots.push_back(tables[b][p / block_size] * block_size + p % block_size);
  const Tensor slot_mapping = Tensor::FromInts(slots, {to - from});
  SEAM_CHECK_OK(WriteKvCache(keys[b].Rows(from, to - from), values[b].Rows(from, to - from), slot_mapping,
                             k_cache, v_cache));
}

int64_t PagedFixture::QueryRow(int b, int j) const {
  int64_t row = 0;
  for (int i = 0; i < b; ++i) row += seqs[i].q_len;
  return row + j;
}

std::vector<double> PagedFixture::Reference(float scale) const {
  const std::vector<double> qv = Values(q);
  std::vector<double> out(qv.size(), 0.0);
  const int group = hq / hk, d = head_dim;
  for (size_t b = 0; b < seqs.size(); ++b) {
    const std::vector<double> kv = Values(keys[b]), vv = Values(values[b]);
    for (int j = 0; j < seqs[b].q_len; ++j) {
      const int64_t row = QueryRow(static_cast<int>(b), j);
      const int pos = seqs[b].context - seqs[b].q_len + j;
      for (int h = 0; h < hq; ++h) {
        const int g = h / group;
        const double* qrow = &qv[(row * hq + h) * d];
        std::vector<double> s(pos + 1);
        for (int p = 0; p <= pos; ++p) {
          double dot = 0.0;
          for (int i = 0; i < d; ++i) dot += qrow[i] * kv[(p * hk + g) * d + i];
          s[p] = dot * scale;
        }
        const double m = *std::max_element(s.begin(), s.end());
        double denom = 0.0;
        for (double& x : s) denom += (x = std::exp(x - m));
        double* o = &out[(row * hq + h) * d];
        for (int p = 0; p <= pos; ++p) {
          for (int i = 0; i < d; ++i) o[i] += s[p] / denom * vv[(p * hk + g) * d + i];
        }
      }
    }
  }
  return out;
}

}  // namespace seam::kernels::testing
