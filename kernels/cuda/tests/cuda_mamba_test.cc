// The Mamba2 and squared-ReLU kernels on CUDA against the CPU reference:
// a prefill over sequences of mixed lengths (one empty, one a padding slot
// of -1) continuing random stored states, then a one-token decode step on
// the states each side wrote, in f32 and bf16. Outputs are poisoned so an
// unwritten element shows; the states are compared after every step.
#include <algorithm>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "cuda_test_util.h"
#include "seam/kernels/ops.h"

namespace seam::kernels::cuda_test {
namespace {

// A prefill of these lengths and slots (4 slots): an empty sequence, a
// padding sequence, and one long enough that the conv window leaves the
// stored state behind. The decode step gives every sequence one token.
const std::vector<int32_t> kPrefillLengths{9, 1, 0, 70};
const std::vector<int32_t> kSlots{1, -1, 3, 0};
constexpr int64_t kStateSlots = 4;

struct HostSequences {
  SequenceStates seqs;
  int64_t tokens = 0;
};

HostSequences Sequences(const std::vector<int32_t>& lengths) {
  std::vector<int32_t> starts{0};
  for (int32_t l : lengths) starts.push_back(starts.back() + l);
  const int64_t n = static_cast<int64_t>(lengths.size());
  return {{Tensor::FromInts(starts, {n + 1}), Tensor::FromInts(kSlots, {n})}, starts.back()};
}

SequenceStates SequencesOnGpu(const SequenceStates& s) {
  return {OnGpu(s.query_start), OnGpu(s.state_slots)};
}

// The recurrent state is fp32 on both sides. The conv state is a copy
// (compared exactly); the SSM state runs the same recurrence, but CUDA's
// expf / log1pf differ from glibc's by an ulp or two in the decay and the
// step, and that difference decays away over the state's memory (a few
// tokens to tens here): about 1e-6 of the state's scale (up to ~10 here).
constexpr Tolerance kStateTolerance{1e-4f, 1e-4f};

std::string DTypeCase(const ::testing::TestParamInfo<DType>& info) { return DTypeName(info.param); }

class ReluSquaredTest : public CudaKernelsTest, public ::testing::WithParamInterface<DType> {};

TEST_P(ReluSquaredTest, MatchesCpuOutOfPlaceAndInPlace) {
  const Tensor x = Random({33, 1001}, GetParam(), 1, -3.0f, 3.0f);
  const Tensor out = PoisonedHost(x.shape(), GetParam());
  ASSERT_TRUE(ReluSquared(x, out).ok());
  const Tensor gout = PoisonedGpu(x.shape(), GetParam());
  const Tensor gx = OnGpu(x);
  ASSERT_TRUE(ReluSquared(gx, gout).ok());
  // One product of a value with itself, rounded once: the same bits.
  ExpectClose(gout, out, kExact, "out");
  ASSERT_TRUE(ReluSquared(gx, gx).ok());
  ExpectClose(gx, out, kExact, "in place");
}

INSTANTIATE_TEST_SUITE_P(DTypes, ReluSquaredTest, ::testing::Values(DType::kF32, DType::kBF16), DTypeCase);

// (dtype, {width, group_size}).
class GatedRmsNormTest : public CudaKernelsTest,
                         public ::testing::WithParamInterface<std::tuple<DType, std::vector<int64_t>>> {};

TEST_P(GatedRmsNormTest, MatchesCpuForSameAndF32Weight) {
  const auto& [dtype, dims] = GetParam();
  const int64_t width = dims[0], group = dims[1];
  for (int64_t rows : {1, 7, 33}) {
    const Tensor x = Random({rows, width}, dtype, 2);
    const Tensor z = Random({rows, width}, dtype, 3, -4.0f, 4.0f);
    for (DType wdt : {dtype, DType::kF32}) {
      const Tensor w = Random({width}, wdt, 4, 0.5f, 1.5f);
      const Tensor out = PoisonedHost({rows, width}, dtype);
      ASSERT_TRUE(GatedRmsNorm(x, z, w, group, 1e-5f, out).ok());
      const Tensor gout = PoisonedGpu({rows, width}, dtype);
      const absl::Status s = GatedRmsNorm(OnGpu(x), OnGpu(z), OnGpu(w), group, 1e-5f, gout);
      ASSERT_TRUE(s.ok()) << s;
      ExpectClose(gout, out, ToleranceFor(dtype), std::to_string(rows) + " rows, weight " + DTypeName(wdt));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Grid, GatedRmsNormTest,
                         ::testing::Combine(::testing::Values(DType::kF32, DType::kBF16),
                                            ::testing::Values(std::vector<int64_t>{64, 16},
                                                              std::vector<int64_t>{1000, 125},
                                                              std::vector<int64_t>{8192, 1024})),
                         [](const auto& info) {
                           return std::string(DTypeName(std::get<0>(info.param))) + "_" +
                                  std::to_string(std::get<1>(info.param)[0]) + "g" +
                                  std::to_string(std::get<1>(info.param)[1]);
                         });

// (dtype, channels, kernel taps).
class CausalConv1dTest : public CudaKernelsTest,
                         public ::testing::WithParamInterface<std::tuple<DType, int64_t, int64_t>> {};

TEST_P(CausalConv1dTest, PrefillThenDecodeMatchCpu) {
  const auto& [dtype, channels, k] = GetParam();
  // The model's layout: fp32 taps and bias; the kernel also takes them in x's dtype without a bias.
  for (bool f32_weights : {true, false}) {
    const DType wdt = f32_weights ? DType::kF32 : dtype;
    const Tensor w = Random({channels, k}, wdt, 5, -0.5f, 0.5f);
    const Tensor bias = f32_weights ? Random({channels}, wdt, 6) : Tensor();
    const Tensor state = Random({kStateSlots, k - 1, channels}, DType::kF32, 7);
    const Tensor gstate = OnGpu(state);
    const std::string what = f32_weights ? "f32 taps and bias" : "taps in x's dtype, no bias";
    uint32_t seed = 8;
    for (const std::vector<int32_t>& lengths : {kPrefillLengths, std::vector<int32_t>(kSlots.size(), 1)}) {
      const HostSequences hs = Sequences(lengths);
      const Tensor x = Random({hs.tokens, channels}, dtype, seed++, -2.0f, 2.0f);
      const Tensor out = PoisonedHost(x.shape(), dtype);
      ASSERT_TRUE(CausalConv1d(x, w, bias, /*silu=*/true, state, hs.seqs, out).ok());
      const Tensor gout = PoisonedGpu(x.shape(), dtype);
      const absl::Status s = CausalConv1d(OnGpu(x), OnGpu(w), bias.defined() ? OnGpu(bias) : Tensor(), true, gstate,
                                          SequencesOnGpu(hs.seqs), gout);
      ASSERT_TRUE(s.ok()) << s;
      const std::string step = (hs.tokens == static_cast<int64_t>(kSlots.size()) ? "decode, " : "prefill, ") + what;
      ExpectClose(gout, out, ToleranceFor(dtype), "out, " + step);
      ExpectClose(gstate, state, kExact, "conv_state, " + step);  // copies of x and of the old state
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Grid, CausalConv1dTest,
                         ::testing::Combine(::testing::Values(DType::kF32, DType::kBF16),
                                            ::testing::Values<int64_t>(96, 1000), ::testing::Values<int64_t>(4, 2)),
                         [](const auto& info) {
                           return std::string(DTypeName(std::get<0>(info.param))) + "_" +
                                  std::to_string(std::get<1>(info.param)) + "c_k" +
                                  std::to_string(std::get<2>(info.param));
                         });

// (dtype, {heads, head_dim, groups, state size}).
class SelectiveScanTest : public CudaKernelsTest,
                          public ::testing::WithParamInterface<std::tuple<DType, std::vector<int64_t>>> {};

// y sums N products of state and c: the state's error above, summed over N
// terms in another order, is an absolute error on the scale of those terms
// (|y| reaches ~30 here while single outputs cancel to near zero), so an
// absolute floor of 1e-3 (~3e-5 of the scale; a wrong index or step is
// O(1)) on top of the dtype's own relative tolerance.
Tolerance ScanTolerance(DType dtype) { return {std::max(ToleranceFor(dtype).rtol, 1e-4f), 1e-3f}; }

TEST_P(SelectiveScanTest, PrefillThenDecodeMatchCpu) {
  const auto& [dtype, dims] = GetParam();
  const int64_t h = dims[0], p = dims[1], g = dims[2], n = dims[3];
  // Without and with a finite dt_max, so the clamp shows.
  for (float dt_max : {std::numeric_limits<float>::infinity(), 0.5f}) {
    SelectiveScanParams cpu;
    cpu.dt_bias = Random({h}, DType::kF32, 20, -1.0f, 1.0f);
    cpu.a = Random({h}, DType::kF32, 21, -1.5f, -0.05f);
    cpu.d = Random({h}, DType::kF32, 22);
    cpu.dt_min = 1e-3f;
    cpu.dt_max = dt_max;
    cpu.ssm_state = Random({kStateSlots, h, p, n}, DType::kF32, 23);
    // The sequential kernel against the recurrence (the chunked one, which
    // kAuto picks for these prefills, has its own suite below).
    cpu.algorithm = ScanAlgorithm::kSequential;
    SelectiveScanParams gpu = cpu;
    for (Tensor* t : {&gpu.dt_bias, &gpu.a, &gpu.d, &gpu.ssm_state}) *t = OnGpu(*t);
    uint32_t seed = 30;
    for (const std::vector<int32_t>& lengths : {kPrefillLengths, std::vector<int32_t>(kSlots.size(), 1)}) {
      const HostSequences hs = Sequences(lengths);
      const int64_t t = hs.tokens;
      cpu.x = Random({t, h, p}, dtype, seed++);
      cpu.dt = Random({t, h}, dtype, seed++, -3.0f, 1.0f);
      cpu.b = Random({t, g, n}, dtype, seed++);
      cpu.c = Random({t, g, n}, dtype, seed++);
      cpu.seqs = hs.seqs;
      cpu.out = PoisonedHost({t, h, p}, dtype);
      ASSERT_TRUE(SelectiveScan(cpu).ok());
      for (auto [dst, src] : {std::make_pair(&gpu.x, &cpu.x), std::make_pair(&gpu.dt, &cpu.dt),
                              std::make_pair(&gpu.b, &cpu.b), std::make_pair(&gpu.c, &cpu.c)}) {
        *dst = OnGpu(*src);
      }
      gpu.seqs = SequencesOnGpu(hs.seqs);
      gpu.out = PoisonedGpu({t, h, p}, dtype);
      const absl::Status s = SelectiveScan(gpu);
      ASSERT_TRUE(s.ok()) << s;
      const std::string step = std::string(t == static_cast<int64_t>(kSlots.size()) ? "decode" : "prefill") +
                               ", dt_max " + std::to_string(dt_max);
      ExpectClose(gpu.out, cpu.out, ScanTolerance(dtype), "out, " + step);
      ExpectClose(gpu.ssm_state, cpu.ssm_state, kStateTolerance, "ssm_state, " + step);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Grid, SelectiveScanTest,
                         ::testing::Combine(::testing::Values(DType::kF32, DType::kBF16),
                                            // tiny model; state 48 (lanes past N); Nemotron-H's head_dim 64 / state 128
                                            ::testing::Values(std::vector<int64_t>{8, 8, 4, 16},
                                                              std::vector<int64_t>{6, 20, 3, 48},
                                                              std::vector<int64_t>{16, 64, 2, 128})),
                         [](const auto& info) {
                           const std::vector<int64_t>& d = std::get<1>(info.param);
                           return std::string(DTypeName(std::get<0>(info.param))) + "_h" + std::to_string(d[0]) +
                                  "p" + std::to_string(d[1]) + "g" + std::to_string(d[2]) + "n" +
                                  std::to_string(d[3]);
                         });

}  // namespace
}  // namespace seam::kernels::cuda_test

namespace seam::kernels::cuda_test {
namespace {

// The chunked SSD kernel (ScanAlgorithm::kChunked) against the CPU's exact
// recurrence. The chunked form sums in another order and feeds the tensor
// cores M, the state and x · w rounded to x's dtype (kernels/tests/
// mamba_chunked_form_test.cc writes the same form out on the host: ~2e-3 of
// the output's scale for bf16 on its data), so outputs and states are
// compared against 1/64 of the call's largest |value| (a wrong decay, row or
// chunk boundary is O(1) of it).
Tolerance ScaledTolerance(const Tensor& want) {
  float scale = 0.0f;
  for (float v : want.ToFloats()) scale = std::max(scale, std::fabs(v));
  return {0.0f, scale / 64};
}

// (dtype, {heads, head_dim, groups, state}, chunk)
using ChunkedParam = std::tuple<DType, std::vector<int64_t>, int64_t>;
class ChunkedScanTest : public CudaKernelsTest, public ::testing::WithParamInterface<ChunkedParam> {
 protected:
  // Inputs for sequences of `lengths` over `slots` (of kSlots state slots).
  static constexpr int64_t kSlots = 6;
  SelectiveScanParams Make(const std::vector<int32_t>& lengths, const std::vector<int32_t>& slots, uint32_t seed) {
    const auto& [dtype, dims, chunk] = GetParam();
    const int64_t h = dims[0], p = dims[1], g = dims[2], n = dims[3];
    std::vector<int32_t> starts{0};
    for (int32_t l : lengths) starts.push_back(starts.back() + l);
    const int64_t t = starts.back();
    SelectiveScanParams s;
    s.x = Random({t, h, p}, dtype, seed);
    s.dt = Random({t, h}, dtype, seed + 1, -3.0f, 1.0f);
    s.b = Random({t, g, n}, dtype, seed + 2);
    s.c = Random({t, g, n}, dtype, seed + 3);
    s.dt_bias = Random({h}, DType::kF32, 20, -1.0f, 1.0f);
    s.a = Random({h}, DType::kF32, 21, -1.5f, -0.05f);
    s.d = Random({h}, DType::kF32, 22);
    s.dt_min = 1e-3f;
    s.dt_max = 8.0f;
    s.seqs = {Tensor::FromInts(starts, {static_cast<int64_t>(starts.size())}),
              Tensor::FromInts(slots, {static_cast<int64_t>(slots.size())})};
    s.out = PoisonedHost({t, h, p}, dtype);
    s.chunk = chunk;
    return s;
  }
  static SelectiveScanParams OnDevice(const SelectiveScanParams& cpu, const Tensor& gpu_state) {
    SelectiveScanParams g = cpu;
    for (Tensor* t : {&g.x, &g.dt, &g.b, &g.c, &g.dt_bias, &g.a, &g.d}) *t = OnGpu(*t);
    g.seqs = SequencesOnGpu(cpu.seqs);
    g.ssm_state = gpu_state;
    g.out = PoisonedGpu(cpu.out.shape(), cpu.out.dtype());
    g.algorithm = ScanAlgorithm::kChunked;
    return g;
  }
};

TEST_P(ChunkedScanTest, RaggedPrefillThenDecodeMatchTheRecurrence) {
  const auto& [dtype, dims, chunk] = GetParam();
  // Lengths off the chunk (150, 70, 33), exactly one chunk (64), one token, none, and a padding slot.
  SelectiveScanParams cpu = Make({150, 1, 0, 70, 64, 33}, {1, -1, 3, 0, 2, 5}, 40);
  cpu.ssm_state = Random({kSlots, dims[0], dims[1], dims[3]}, DType::kF32, 41);
  const Tensor gstate = OnGpu(cpu.ssm_state);
  SelectiveScanParams gpu = OnDevice(cpu, gstate);
  ASSERT_TRUE(SelectiveScan(cpu).ok());
  const absl::Status s = SelectiveScan(gpu);
  ASSERT_TRUE(s.ok()) << s;
  ExpectClose(gpu.out, cpu.out, ScaledTolerance(cpu.out), "prefill out");
  ExpectClose(gstate, cpu.ssm_state, ScaledTolerance(cpu.ssm_state), "prefill ssm_state");
  // A decode step on the states each side wrote: kAuto runs the sequential kernel.
  SelectiveScanParams step = Make({1, 1, 1, 1, 1, 1}, {1, -1, 3, 0, 2, 5}, 50);
  step.ssm_state = cpu.ssm_state;
  SelectiveScanParams gstep = OnDevice(step, gstate);
  gstep.algorithm = ScanAlgorithm::kAuto;
  ASSERT_TRUE(SelectiveScan(step).ok());
  ASSERT_TRUE(SelectiveScan(gstep).ok());
  ExpectClose(gstep.out, step.out, ScaledTolerance(step.out), "decode out");
  ExpectClose(gstate, step.ssm_state, ScaledTolerance(step.ssm_state), "decode ssm_state");
}

// A prompt in one call, or in two (77 + 123 tokens, the state carried in its
// slot): both match the recurrence and each other.
TEST_P(ChunkedScanTest, APromptSplitOverTwoCallsEqualsOneCall) {
  const auto& [dtype, dims, chunk] = GetParam();
  SelectiveScanParams whole = Make({200}, {0}, 60);
  whole.ssm_state = Tensor::Zeros({1, dims[0], dims[1], dims[3]}, DType::kF32);
  const Tensor one_state = OnGpu(whole.ssm_state), two_state = OnGpu(whole.ssm_state);
  SelectiveScanParams gone = OnDevice(whole, one_state);
  ASSERT_TRUE(SelectiveScan(gone).ok());
  const Tensor two_out = PoisonedGpu(whole.out.shape(), whole.out.dtype());
  for (auto [from, len] : {std::pair<int64_t, int64_t>{0, 77}, {77, 123}}) {
    SelectiveScanParams part = gone;
    part.x = gone.x.Rows(from, len);
    part.dt = gone.dt.Rows(from, len);
    part.b = gone.b.Rows(from, len);
    part.c = gone.c.Rows(from, len);
    part.out = two_out.Rows(from, len);
    part.seqs = SequencesOnGpu({Tensor::FromInts({0, static_cast<int32_t>(len)}, {2}), Tensor::FromInts({0}, {1})});
    part.ssm_state = two_state;
    const absl::Status s = SelectiveScan(part);
    ASSERT_TRUE(s.ok()) << s;
  }
  ASSERT_TRUE(SelectiveScan(whole).ok());
  ExpectClose(gone.out, whole.out, ScaledTolerance(whole.out), "one call, out");
  ExpectClose(two_out, whole.out, ScaledTolerance(whole.out), "two calls, out");
  ExpectClose(one_state, whole.ssm_state, ScaledTolerance(whole.ssm_state), "one call, ssm_state");
  ExpectClose(two_state, whole.ssm_state, ScaledTolerance(whole.ssm_state), "two calls, ssm_state");
}

INSTANTIATE_TEST_SUITE_P(Grid, ChunkedScanTest,
                         ::testing::Combine(::testing::Values(DType::kBF16, DType::kF16),
                                            // Nemotron-H's head_dim 64 / state 128; head_dim 32 and 96, state 64
                                            ::testing::Values(std::vector<int64_t>{16, 64, 2, 128},
                                                              std::vector<int64_t>{4, 32, 2, 64},
                                                              std::vector<int64_t>{6, 96, 3, 64}),
                                            ::testing::Values<int64_t>(32, 64)),
                         [](const auto& info) {
                           const std::vector<int64_t>& d = std::get<1>(info.param);
                           return std::string(DTypeName(std::get<0>(info.param))) + "_h" + std::to_string(d[0]) +
                                  "p" + std::to_string(d[1]) + "n" + std::to_string(d[3]) + "_chunk" +
                                  std::to_string(std::get<2>(info.param));
                         });

TEST_F(CudaKernelsTest, ChunkedScanRefusesWhatItDoesNotTile) {
  SelectiveScanParams p;
  p.x = PoisonedGpu({4, 2, 8}, DType::kBF16);
  p.dt = PoisonedGpu({4, 2}, DType::kBF16);
  p.b = PoisonedGpu({4, 1, 16}, DType::kBF16);
  p.c = PoisonedGpu({4, 1, 16}, DType::kBF16);
  p.dt_bias = OnGpu(Random({2}, DType::kF32, 1));
  p.a = OnGpu(Random({2}, DType::kF32, 2, -1.0f, -0.1f));
  p.d = OnGpu(Random({2}, DType::kF32, 3));
  p.ssm_state = OnGpu(Tensor::Zeros({1, 2, 8, 16}, DType::kF32));
  p.seqs = SequencesOnGpu({Tensor::FromInts({0, 4}, {2}), Tensor::FromInts({0}, {1})});
  p.out = PoisonedGpu({4, 2, 8}, DType::kBF16);
  p.algorithm = ScanAlgorithm::kChunked;
  const absl::Status s = SelectiveScan(p);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented) << s;
  p.algorithm = ScanAlgorithm::kAuto;  // the sequential kernel takes it
  EXPECT_TRUE(SelectiveScan(p).ok());
}

}  // namespace
}  // namespace seam::kernels::cuda_test
