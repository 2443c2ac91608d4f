// The state-space ops against plain double-precision references: the conv1d
// by its definition, the scan by SSD's quadratic form (every earlier token's
// contribution decayed by the summed steps since, which is what chunked
// implementations compute), the gated norm per group, and the squared ReLU.
// Prefill then one-token steps must equal one prefill of the whole sequence
// bit for bit (the same recurrence in the same order).
#include <cmath>
#include <vector>

#include <gtest/gtest.h>

#include "seam/kernels/ops.h"
#include "tests/reference.h"

namespace seam::kernels {
namespace {

using testing::ExpectAllClose;
using testing::RandomTensor;
using testing::Values;

SequenceStates Seqs(const std::vector<int32_t>& starts, const std::vector<int32_t>& slots) {
  return {Tensor::FromInts(starts, {static_cast<int64_t>(starts.size())}),
          Tensor::FromInts(slots, {static_cast<int64_t>(slots.size())})};
}

double Softplus(double v) { return v > 20.0 ? v : std::log1p(std::exp(v)); }

TEST(ReluSquared, MatchesDefinition) {
  const Tensor x = RandomTensor({5, 7}, DType::kF32, 1);
  Tensor out = Tensor::Empty({5, 7}, DType::kF32);
  ASSERT_TRUE(ReluSquared(x, out).ok());
  std::vector<double> want;
  for (double v : Values(x)) want.push_back(v > 0 ? v * v : 0.0);
  ExpectAllClose(out, want, 1e-7, "relu2");
}

// conv: sequences of 5 and 3 rows (the second continuing a stored state), K = 4.
TEST(CausalConv1d, MatchesDefinitionFromZeroAndStoredState) {
  const int64_t c = 6, k = 4, t = 8;
  const Tensor x = RandomTensor({t, c}, DType::kF32, 2), w = RandomTensor({c, k}, DType::kF32, 3);
  const Tensor bias = RandomTensor({c}, DType::kF32, 4);
  Tensor state = Tensor::Zeros({3, k - 1, c}, DType::kF32);
  const Tensor stored = RandomTensor({k - 1, c}, DType::kF32, 5);
  ASSERT_TRUE(CopyInto(stored, state.Rows(2, 1).Reshape({k - 1, c}).value()).ok());
  Tensor out = Tensor::Empty({t, c}, DType::kF32);
  ASSERT_TRUE(CausalConv1d(x, w, bias, true, state, Seqs({0, 5, 8}, {0, 2}), out).ok());
  const std::vector<double> xv = Values(x), wv = Values(w), bv = Values(bias), sv = Values(stored);
  std::vector<double> want(t * c);
  for (int64_t r = 0; r < t; ++r) {
    const bool second = r >= 5;
    const int64_t begin = second ? 5 : 0;
    for (int64_t ch = 0; ch < c; ++ch) {
      double acc = bv[ch];
      for (int64_t j = 0; j < k; ++j) {
        const int64_t src = r - (k - 1) + j;  // row of x, or of the stored state before `begin`
        double v = 0;
        if (src >= begin) v = xv[src * c + ch];
        else if (second) v = sv[(k - 1 + src - begin) * c + ch];
        acc += wv[ch * k + j] * v;
      }
      want[r * c + ch] = acc / (1 + std::exp(-acc));
    }
  }
  ExpectAllClose(out, want, 1e-6, "conv1d");
  // The state keeps each sequence's last K - 1 inputs.
  std::vector<double> last(xv.begin() + 2 * c, xv.begin() + 5 * c);
  ExpectAllClose(state.Rows(0, 1), last, 0, "state of sequence 0");
  std::vector<double> tail(sv.begin() + 2 * c, sv.end());
  for (int64_t r = 5; r < 8; ++r) tail.insert(tail.end(), xv.begin() + r * c, xv.begin() + (r + 1) * c);
  tail.erase(tail.begin(), tail.begin() + c);
  ExpectAllClose(state.Rows(2, 1), tail, 0, "state of sequence 1");
}

TEST(CausalConv1d, OneTokenUpdatesEqualOnePrefill) {
  const int64_t c = 5, k = 4, t = 9;
  const Tensor x = RandomTensor({t, c}, DType::kF32, 6), w = RandomTensor({c, k}, DType::kF32, 7);
  Tensor whole_state = Tensor::Zeros({1, k - 1, c}, DType::kF32), step_state = whole_state.Clone();
  Tensor whole = Tensor::Empty({t, c}, DType::kF32);
  ASSERT_TRUE(CausalConv1d(x, w, Tensor(), false, whole_state, Seqs({0, 9}, {0}), whole).ok());
  Tensor steps = Tensor::Empty({t, c}, DType::kF32);
  ASSERT_TRUE(CausalConv1d(x.Rows(0, 2), w, Tensor(), false, step_state, Seqs({0, 2}, {0}), steps.Rows(0, 2)).ok());
  for (int64_t r = 2; r < t; ++r) {
    ASSERT_TRUE(CausalConv1d(x.Rows(r, 1), w, Tensor(), false, step_state, Seqs({0, 1}, {0}), steps.Rows(r, 1)).ok());
  }
  EXPECT_EQ(Values(steps), Values(whole));
  EXPECT_EQ(Values(step_state), Values(whole_state));
}

struct ScanCase {
  int64_t heads = 4, hd = 3, groups = 2, n = 5;
  Tensor x, dt, dt_bias, a, b, c, d;
  ScanCase(int64_t t, uint64_t seed) {
    x = RandomTensor({t, heads, hd}, DType::kF32, seed);
    dt = RandomTensor({t, heads}, DType::kF32, seed + 1);
    dt_bias = RandomTensor({heads}, DType::kF32, seed + 2);
    std::vector<float> av;
    for (double v : Values(RandomTensor({heads}, DType::kF32, seed + 3))) av.push_back(-std::exp(std::fabs(v)));
    a = Tensor::FromFloats(av, {heads});
    b = RandomTensor({t, groups, n}, DType::kF32, seed + 4);
    c = RandomTensor({t, groups, n}, DType::kF32, seed + 5);
    d = RandomTensor({heads}, DType::kF32, seed + 6);
  }
  SelectiveScanParams Params(const Tensor& state, const SequenceStates& seqs, const Tensor& out) const {
    SelectiveScanParams p{x, dt, dt_bias, a, b, c, d};
    p.ssm_state = state;
    p.seqs = seqs;
    p.out = out;
    return p;
  }
  // y[t] = Σ_{s ≤ t} (C_t · B_s) · exp(A · Σ_{s < r ≤ t} dt_r) · dt_s · x_s + D · x_t, within [begin, end).
  std::vector<double> Quadratic(int64_t begin, int64_t end, double lo, double hi) const {
    const std::vector<double> xv = Values(x), dv = Values(dt), bias = Values(dt_bias), av = Values(a),
                              bv = Values(b), cv = Values(c), dd = Values(d);
    std::vector<double> y;
    const int64_t per = heads / groups;
    auto step = [&](int64_t r, int64_t h) { return std::clamp(Softplus(dv[r * heads + h] + bias[h]), lo, hi); };
    for (int64_t t = begin; t < end; ++t) {
      for (int64_t h = 0; h < heads; ++h) {
        const int64_t g = h / per;
        for (int64_t i = 0; i < hd; ++i) {
          double acc = dd[h] * xv[(t * heads + h) * hd + i];
          for (int64_t s = begin; s <= t; ++s) {
            double cb = 0, sum = 0;
            for (int64_t j = 0; j < n; ++j) cb += cv[(t * groups + g) * n + j] * bv[(s * groups + g) * n + j];
            for (int64_t r = s + 1; r <= t; ++r) sum += step(r, h);
            acc += cb * std::exp(av[h] * sum) * step(s, h) * xv[(s * heads + h) * hd + i];
          }
          y.push_back(acc);
        }
      }
    }
    return y;
  }
};

TEST(SelectiveScan, MatchesTheQuadraticFormOverMixedLengths) {
  const ScanCase k(10, 11);
  Tensor state = Tensor::Zeros({4, 4, 3, 5}, DType::kF32);
  Tensor out = Tensor::Empty({10, 4, 3}, DType::kF32);
  ASSERT_TRUE(SelectiveScan(k.Params(state, Seqs({0, 7, 7, 10}, {3, 1, -1}), out)).ok());
  std::vector<double> want = k.Quadratic(0, 7, 0, INFINITY);
  const std::vector<double> second = k.Quadratic(7, 10, 0, INFINITY);
  want.insert(want.end(), second.begin(), second.end());
  ExpectAllClose(out, want, 2e-5, "scan");
  // The padding sequence (slot -1) and the empty one leave their slots alone.
  for (double v : Values(state.Rows(0, 1))) EXPECT_EQ(v, 0.0);
  for (double v : Values(state.Rows(1, 1))) EXPECT_EQ(v, 0.0);
}

TEST(SelectiveScan, DecodeStepsEqualOnePrefillAndLimitsClampTheStep) {
  const ScanCase k(6, 21);
  Tensor whole_state = Tensor::Zeros({1, 4, 3, 5}, DType::kF32), step_state = whole_state.Clone();
  Tensor whole = Tensor::Empty({6, 4, 3}, DType::kF32), steps = Tensor::Empty({6, 4, 3}, DType::kF32);
  ASSERT_TRUE(SelectiveScan(k.Params(whole_state, Seqs({0, 6}, {0}), whole)).ok());
  for (int64_t r = 0; r < 6; ++r) {
    ScanCase one = k;
    for (Tensor* t : {&one.x, &one.dt, &one.b, &one.c}) *t = t->Rows(r, 1);
    ASSERT_TRUE(SelectiveScan(one.Params(step_state, Seqs({0, 1}, {0}), steps.Rows(r, 1))).ok());
  }
  EXPECT_EQ(Values(steps), Values(whole));
  EXPECT_EQ(Values(step_state), Values(whole_state));

  SelectiveScanParams p = k.Params(Tensor::Zeros({1, 4, 3, 5}, DType::kF32), Seqs({0, 6}, {0}), whole);
  p.dt_min = 0.5f;
  p.dt_max = 0.75f;
  ASSERT_TRUE(SelectiveScan(p).ok());
  ExpectAllClose(whole, k.Quadratic(0, 6, 0.5, 0.75), 2e-5, "clamped scan");
}

TEST(SelectiveScan, RefusesGroupsThatDoNotDivideHeadsAndBadQueryStarts) {
  const ScanCase k(4, 31);
  Tensor out = Tensor::Empty({4, 4, 3}, DType::kF32);
  SelectiveScanParams p = k.Params(Tensor::Zeros({2, 4, 3, 5}, DType::kF32), Seqs({0, 4}, {0}), out);
  p.b = RandomTensor({4, 3, 5}, DType::kF32, 1);
  p.c = p.b;
  absl::Status s = SelectiveScan(p);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("3 groups do not divide the 4 heads"), std::string::npos) << s;
  p = k.Params(Tensor::Zeros({2, 4, 3, 5}, DType::kF32), Seqs({0, 3}, {0}), out);
  s = SelectiveScan(p);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("query_start: must run from 0 to the 4 rows"), std::string::npos) << s;
  p = k.Params(Tensor::Zeros({2, 4, 3, 5}, DType::kF32), Seqs({0, 4}, {2}), out);
  s = SelectiveScan(p);
  EXPECT_NE(s.message().find("sequence 0 names slot 2 of 2"), std::string::npos) << s;
}

TEST(GatedRmsNorm, NormalisesEachGroupOfTheGatedValues) {
  const int64_t t = 3, width = 8, group = 4;
  const Tensor x = RandomTensor({t, width}, DType::kF32, 41), z = RandomTensor({t, width}, DType::kF32, 42);
  const Tensor w = RandomTensor({width}, DType::kF32, 43);
  Tensor out = Tensor::Empty({t, width}, DType::kF32);
  ASSERT_TRUE(GatedRmsNorm(x, z, w, group, 1e-5f, out).ok());
  const std::vector<double> xv = Values(x), zv = Values(z), wv = Values(w);
  std::vector<double> want(t * width);
  for (int64_t r = 0; r < t; ++r) {
    for (int64_t g = 0; g < width; g += group) {
      double sq = 0;
      std::vector<double> gated(group);
      for (int64_t i = 0; i < group; ++i) {
        const double zi = zv[r * width + g + i];
        gated[i] = xv[r * width + g + i] * zi / (1 + std::exp(-zi));
        sq += gated[i] * gated[i];
      }
      const double inv = 1 / std::sqrt(sq / group + 1e-5);
      for (int64_t i = 0; i < group; ++i) want[r * width + g + i] = wv[g + i] * gated[i] * inv;
    }
  }
  ExpectAllClose(out, want, 1e-6, "gated norm");
  EXPECT_EQ(GatedRmsNorm(x, z, w, 3, 1e-5f, out).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace seam::kernels
