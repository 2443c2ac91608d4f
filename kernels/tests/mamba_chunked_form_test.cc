// The chunked SSD form the CUDA kernel runs (kernels/cuda/mamba_chunk_scan.cu),
// written out on the host step for step, against SelectiveScan's CPU
// reference (the exact recurrence): its algebra (the decays inside a chunk,
// the state entering it, the state passed on), its padding of a ragged last
// chunk, and the error its rounded tensor-core operands add. With no
// rounding it is the recurrence up to fp32 reordering (1e-5); with M, the
// state and x · w rounded to bf16 as the kernel feeds them to the tensor
// cores, the outputs stay within kChunkedScanBf16Tolerance of the output's
// scale (the bound the CUDA test states). Over chunk sizes 32 and 64, a
// ragged batch of sequences (lengths not multiples of the chunk, one empty,
// one a padding slot) and a prompt split over two calls.
#include <cmath>
#include <vector>

#include <gtest/gtest.h>

#include "seam/core/dtype.h"
#include "seam/kernels/ops.h"
#include "tests/reference.h"

namespace seam::kernels {
namespace {

using testing::Values;

// Relative to the largest |out| of the call (y sums N products and cancels,
// so elementwise relative bounds mean nothing near zero). Measured here on
// the test's data: about 3e-3 for bf16 operands; bf16 output rounding alone
// is 2^-9 of each element.
constexpr double kChunkedScanBf16Tolerance = 1.0 / 64;

struct Dims {
  int64_t heads, head_dim, groups, state;
};

float Round(float v, bool bf16) { return bf16 ? BF16ToFloat(FloatToBF16(v)) : v; }
float Softplus(float v) { return v > 20.0f ? v : std::log1p(std::exp(v)); }

// The chunked form over one call: rows [qs[i], qs[i+1]) of sequence i, its
// state slot (or zeros for -1), chunks of `chunk` rows from each sequence's
// first row. `bf16`: round M, the state and x · w as the kernel does.
void RunChunkedForm(const SelectiveScanParams& p, const Dims& d, int64_t chunk, bool bf16, std::vector<float>& state,
                 std::vector<float>& out) {
  const std::vector<double> x = Values(p.x), dt = Values(p.dt), b = Values(p.b), c = Values(p.c);
  const std::vector<double> bias = Values(p.dt_bias), a = Values(p.a), dd = Values(p.d);
  const std::vector<int32_t> qs = testing::Ints(p.seqs.query_start), slots = testing::Ints(p.seqs.state_slots);
  const int64_t H = d.heads, P = d.head_dim, N = d.state, G = d.groups;
  out.assign(x.size(), 0.0f);
  for (size_t i = 0; i + 1 < qs.size(); ++i) {
    for (int64_t h = 0; h < H; ++h) {
      const int64_t g = h / (H / G);
      std::vector<float> hs(P * N, 0.0f);
      float* slot = slots[i] >= 0 ? &state[((slots[i] * H) + h) * P * N] : nullptr;
      if (slot != nullptr) hs.assign(slot, slot + P * N);
      for (int64_t r0 = qs[i]; r0 < qs[i + 1]; r0 += chunk) {
        const int64_t len = std::min<int64_t>(chunk, qs[i + 1] - r0);
        std::vector<float> step(len), acum(len);
        float run = 0.0f;
        for (int64_t t = 0; t < len; ++t) {
          step[t] = std::clamp(Softplus(static_cast<float>(dt[(r0 + t) * H + h] + bias[h])), p.dt_min, p.dt_max);
          run += step[t] * static_cast<float>(a[h]);
          acum[t] = run;
        }
        auto X = [&](int64_t t, int64_t q) { return static_cast<float>(x[((r0 + t) * H + h) * P + q]); };
        auto B = [&](int64_t t, int64_t n) { return static_cast<float>(b[((r0 + t) * G + g) * N + n]); };
        auto C = [&](int64_t t, int64_t n) { return static_cast<float>(c[((r0 + t) * G + g) * N + n]); };
        for (int64_t t = 0; t < len; ++t) {
          for (int64_t q = 0; q < P; ++q) {
            float intra = 0.0f, carried = 0.0f;
            for (int64_t s = 0; s <= t; ++s) {
              float cb = 0.0f;
              for (int64_t n = 0; n < N; ++n) cb += C(t, n) * B(s, n);
              intra += Round(cb * std::exp(acum[t] - acum[s]) * step[s], bf16) * X(s, q);
            }
            for (int64_t n = 0; n < N; ++n) carried += C(t, n) * Round(hs[q * N + n], bf16);
            out[((r0 + t) * H + h) * P + q] =
                intra + std::exp(acum[t]) * carried + static_cast<float>(dd[h]) * X(t, q);
          }
        }
        const float decay = std::exp(acum[len - 1]);
        for (int64_t q = 0; q < P; ++q) {
          for (int64_t n = 0; n < N; ++n) {
            float sum = decay * hs[q * N + n];
            for (int64_t s = 0; s < len; ++s) {
              sum += Round(X(s, q) * std::exp(acum[len - 1] - acum[s]) * step[s], bf16) * B(s, n);
            }
            hs[q * N + n] = sum;
          }
        }
      }
      if (slot != nullptr) std::copy(hs.begin(), hs.end(), slot);
    }
  }
}

SelectiveScanParams Inputs(const Dims& d, const std::vector<int32_t>& lengths, const std::vector<int32_t>& slots,
                           DType dtype, uint32_t seed) {
  std::vector<int32_t> starts{0};
  for (int32_t l : lengths) starts.push_back(starts.back() + l);
  const int64_t t = starts.back();
  SelectiveScanParams p;
  p.x = testing::RandomTensor({t, d.heads, d.head_dim}, dtype, seed);
  p.dt = testing::RandomTensor({t, d.heads}, dtype, seed + 1);
  p.b = testing::RandomTensor({t, d.groups, d.state}, dtype, seed + 2);
  p.c = testing::RandomTensor({t, d.groups, d.state}, dtype, seed + 3);
  p.dt_bias = testing::RandomTensor({d.heads}, DType::kF32, seed + 4);
  std::vector<float> a(d.heads);
  for (int64_t h = 0; h < d.heads; ++h) a[h] = -0.05f - 1.45f * static_cast<float>(h) / static_cast<float>(d.heads);
  p.a = Tensor::FromFloats(a, {d.heads});
  p.d = testing::RandomTensor({d.heads}, DType::kF32, seed + 5);
  p.dt_min = 1e-3f;
  p.seqs = {Tensor::FromInts(starts, {static_cast<int64_t>(starts.size())}),
            Tensor::FromInts(slots, {static_cast<int64_t>(slots.size())})};
  p.out = Tensor::Empty({t, d.heads, d.head_dim}, DType::kF32);
  return p;
}

double MaxAbs(const std::vector<double>& v) {
  double m = 0;
  for (double x : v) m = std::max(m, std::fabs(x));
  return m;
}

// max |got - want| / max |want| over the call.
double ScaledError(const std::vector<float>& got, const std::vector<double>& want) {
  double err = 0;
  for (size_t i = 0; i < got.size(); ++i) err = std::max(err, std::fabs(got[i] - want[i]));
  return err / std::max(MaxAbs(want), 1e-30);
}

class ChunkedForm : public ::testing::TestWithParam<int64_t> {};

TEST_P(ChunkedForm, EqualsTheRecurrenceOverRaggedSequencesAndCarriedStates) {
  const int64_t chunk = GetParam();
  const Dims d{4, 8, 2, 16};
  // 150 and 70 rows: ragged last chunks; 0: nothing; 1: a lone token; slot -1: padding.
  const std::vector<int32_t> lengths{150, 1, 0, 70, 33}, slots{1, -1, 3, 0, 2};
  for (bool bf16 : {false, true}) {
    SelectiveScanParams p = Inputs(d, lengths, slots, DType::kF32, 7);
    if (bf16) {  // the kernel's inputs are bf16: round them, compute on the rounded values
      for (Tensor* t : {&p.x, &p.dt, &p.b, &p.c}) *t = Tensor::FromFloats(t->ToFloats(), t->shape(), DType::kBF16);
      for (Tensor* t : {&p.x, &p.dt, &p.b, &p.c}) *t = Tensor::FromFloats(t->ToFloats(), t->shape(), DType::kF32);
    }
    p.ssm_state = testing::RandomTensor({4, d.heads, d.head_dim, d.state}, DType::kF32, 9);
    std::vector<float> state = p.ssm_state.ToFloats(), out;
    RunChunkedForm(p, d, chunk, bf16, state, out);
    ASSERT_TRUE(SelectiveScan(p).ok());  // the recurrence, in place on p.ssm_state
    const double out_err = ScaledError(out, Values(p.out));
    const double state_err = ScaledError(state, Values(p.ssm_state));
    std::printf("chunk %lld, %s operands: out error %.2e, state error %.2e of their scale\n",
                static_cast<long long>(chunk), bf16 ? "bf16" : "fp32", out_err, state_err);
    EXPECT_LE(out_err, bf16 ? kChunkedScanBf16Tolerance : 1e-5);
    EXPECT_LE(state_err, bf16 ? kChunkedScanBf16Tolerance : 1e-5);
  }
}

// One prompt in one call, or split in two calls (the state carried through
// the cache slot): the same outputs and state, whatever the chunk boundaries.
TEST_P(ChunkedForm, APromptSplitOverTwoCallsEqualsOneCall) {
  const int64_t chunk = GetParam();
  const Dims d{2, 8, 1, 16};
  SelectiveScanParams whole = Inputs(d, {130}, {0}, DType::kF32, 21);
  whole.ssm_state = Tensor::Zeros({1, d.heads, d.head_dim, d.state}, DType::kF32);
  std::vector<float> state_one(whole.ssm_state.numel(), 0.0f), out_one;
  RunChunkedForm(whole, d, chunk, false, state_one, out_one);
  std::vector<float> state_two(whole.ssm_state.numel(), 0.0f), out_two;
  for (auto [from, len] : {std::pair<int64_t, int64_t>{0, 77}, {77, 53}}) {
    SelectiveScanParams part = whole;
    part.x = whole.x.Rows(from, len).Clone();
    part.dt = whole.dt.Rows(from, len).Clone();
    part.b = whole.b.Rows(from, len).Clone();
    part.c = whole.c.Rows(from, len).Clone();
    part.seqs = {Tensor::FromInts({0, static_cast<int32_t>(len)}, {2}), Tensor::FromInts({0}, {1})};
    std::vector<float> out;
    RunChunkedForm(part, d, chunk, false, state_two, out);
    out_two.insert(out_two.end(), out.begin(), out.end());
  }
  std::vector<double> one(out_one.begin(), out_one.end()), first(state_one.begin(), state_one.end());
  EXPECT_LE(ScaledError(out_two, one), 1e-5);
  EXPECT_LE(ScaledError(state_two, first), 1e-5);
}

INSTANTIATE_TEST_SUITE_P(Chunks, ChunkedForm, ::testing::Values<int64_t>(32, 64),
                         [](const ::testing::TestParamInfo<int64_t>& info) {
                           return "chunk" + std::to_string(info.param);
                         });

TEST(SelectiveScan, RefusesAChunkTheKernelHasNot) {
  const Dims d{2, 8, 1, 16};
  SelectiveScanParams p = Inputs(d, {4}, {0}, DType::kF32, 3);
  p.ssm_state = Tensor::Zeros({1, d.heads, d.head_dim, d.state}, DType::kF32);
  p.chunk = 48;
  const absl::Status s = SelectiveScan(p);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("chunk: expected 32 or 64"), std::string::npos) << s;
  EXPECT_TRUE(ChunkedScanTakes(DType::kBF16, 64, 128));
  EXPECT_FALSE(ChunkedScanTakes(DType::kF32, 64, 128));
  EXPECT_FALSE(ChunkedScanTakes(DType::kBF16, 48, 128));
  EXPECT_FALSE(ChunkedScanTakes(DType::kBF16, 64, 48));
}

}  // namespace
}  // namespace seam::kernels
