// The fused expert pair (ExpertGateUpSilu, then ExpertDown;
// seam/kernels/moe_experts.h) on CUDA against the CPU reference, for both
// kernels (the decode GEMV and the tensor-core grouped GEMM) and every size
// class a MoE step brings: decode batches of 1, 8, 32 and 128 rows at top-8
// of 128 experts on Qwen3-30B-A3B's expert shape (hidden 2048, intermediate
// 768) and prefill-sized ones, with uniform routing, one hot expert taking
// every row, and a skewed routing where a few experts take most pairs and
// many have none. Both sides run on the CPU's groups (copied to the GPU), so
// the activations' group order is the same; GroupByExpert itself is tested
// in cuda_moe_experts_test.cc. Outputs are poisoned so unwritten rows show.
//
// Tolerance: both sides sum K products in fp32 in different orders, so the
// sums agree to a few fp32 ulps of their magnitude; bf16 / f16 outputs may
// then round one storage ulp apart (ToleranceFor), and g and u are each
// rounded before the SiLU-mul: g's ulp grows by SiLU's log-slope (up to
// ~1.3), u's adds one, the output's rounding half of one, so an activation
// can sit ~2.8 ulps (2^-7 each for bf16) apart: rtol 2^-5 (bf16; 2^-8 for
// f16). On an H200, 3 of 196,608 bf16 activations at 32 and 128 rows were
// past 2^-6 (0.4629 against 0.4512). Sums that cancel to near zero get an
// absolute floor of the cancellation over K terms of |x| |w| ≤ 1 (as
// cuda_moe_experts_test.cc's ExpertMatmul).
#include <algorithm>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "cuda_test_util.h"
#include "seam/kernels/moe_experts.h"

namespace seam::kernels::cuda_test {
namespace {

enum class Routing { kUniform, kHot, kSkewed };

const char* RoutingName(Routing r) {
  return r == Routing::kUniform ? "uniform" : r == Routing::kHot ? "hot" : "skewed";
}

// `rows` rows of g distinct experts each.
std::vector<int32_t> Routes(int64_t rows, int64_t g, int64_t experts, Routing routing, uint32_t seed) {
  std::mt19937 gen(seed);
  std::vector<double> weight(experts, 1.0);
  if (routing == Routing::kSkewed) {  // Zipf-like: expert e drawn ∝ 1 / (e + 1)², most never
    for (int64_t e = 0; e < experts; ++e) weight[e] = 1.0 / static_cast<double>((e + 1) * (e + 1));
  }
  std::vector<int32_t> ids;
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<double> left = weight;
    std::vector<int32_t> row;
    if (routing == Routing::kHot) {
      row.push_back(0);
      left[0] = 0.0;
    }
    while (static_cast<int64_t>(row.size()) < g) {
      std::discrete_distribution<int32_t> pick(left.begin(), left.end());
      const int32_t e = pick(gen);
      row.push_back(e);
      left[e] = 0.0;
    }
    std::shuffle(row.begin(), row.end(), gen);
    ids.insert(ids.end(), row.begin(), row.end());
  }
  return ids;
}

// The groups of `ids` built on the CPU, and the same tensors on the GPU.
struct Groups {
  ExpertGroups cpu, gpu;
};
Groups GroupsOf(const std::vector<int32_t>& ids, int64_t experts) {
  const int64_t pairs = static_cast<int64_t>(ids.size());
  absl::StatusOr<ExpertGroups> g = ExpertGroups::Empty(experts, pairs, Device::CPU());
  EXPECT_TRUE(g.ok()) << g.status();
  EXPECT_TRUE(GroupByExpert(Tensor::FromInts(ids, {pairs}), *g).ok());
  Groups out{*g, *g};
  for (Tensor* t : {&out.gpu.offsets, &out.gpu.order, &out.gpu.active, &out.gpu.tile_starts}) *t = OnGpu(*t);
  return out;
}

// (dtype, rows, top-k, experts, intermediate, hidden, routing, kernel)
using FusedParam = std::tuple<DType, int64_t, int64_t, int64_t, int64_t, int64_t, Routing, ExpertKernel>;
class CudaFusedExpertsTest : public CudaKernelsTest, public ::testing::WithParamInterface<FusedParam> {};

Tolerance FusedTolerance(DType dtype, float cancellation) {
  const float rtol = dtype == DType::kBF16 ? 1.0f / 32 : dtype == DType::kF16 ? 1.0f / 256 : 1e-5f;
  return {rtol, cancellation};
}

TEST_P(CudaFusedExpertsTest, GateUpSiluThenDownMatchCpu) {
  const auto& [dtype, rows, g, experts, inter, hidden, routing, kernel] = GetParam();
  const uint32_t seed = static_cast<uint32_t>(rows * 131 + experts * 7 + inter + static_cast<int>(routing));
  const std::vector<int32_t> ids = Routes(rows, g, experts, routing, seed);
  const int64_t pairs = rows * g;
  const Groups groups = GroupsOf(ids, experts);
  const Tensor x = Random({rows, hidden}, dtype, seed + 1);
  const Tensor gate_up = Random({experts, 2 * inter, hidden}, dtype, seed + 2, -0.5f, 0.5f);
  const Tensor down = Random({experts, hidden, inter}, dtype, seed + 3, -0.5f, 0.5f);

  const Tensor act = PoisonedHost({pairs, inter}, dtype);
  ASSERT_TRUE(ExpertGateUpSilu(x, gate_up, groups.cpu, act).ok());
  const Tensor gact = PoisonedGpu({pairs, inter}, dtype);
  absl::Status s = ExpertGateUpSilu(OnGpu(x), OnGpu(gate_up), groups.gpu, gact, kernel);
  ASSERT_TRUE(s.ok()) << s;
  const float f32 = dtype == DType::kF32 ? 1.0f : 0.0f;
  ExpectClose(gact, act, FusedTolerance(dtype, f32 * 1e-4f + (1.0f - f32) * 4e-3f), "act");

  // The down projection of the CPU's activations on both sides: its own error only.
  const Tensor out = PoisonedHost({pairs, hidden}, dtype);
  ASSERT_TRUE(ExpertDown(act, down, groups.cpu, out).ok());
  const Tensor gout = PoisonedGpu({pairs, hidden}, dtype);
  s = ExpertDown(OnGpu(act), OnGpu(down), groups.gpu, gout, kernel);
  if (!ExpertMatmulTakes(dtype, inter)) {
    // Rows of `inter` features that are not whole 16-byte vectors: the
    // kernels refuse the down projection by name (a MoE block whose shapes
    // ExpertMatmulTakes refuses runs its experts one by one).
    EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented) << s;
    return;
  }
  ASSERT_TRUE(s.ok()) << s;
  ExpectClose(gout, out, FusedTolerance(dtype, f32 * 1e-4f + (1.0f - f32) * 4e-3f), "out");
}

std::string FusedName(const ::testing::TestParamInfo<FusedParam>& info) {
  const auto& [dtype, rows, g, experts, inter, hidden, routing, kernel] = info.param;
  return std::string(DTypeName(dtype)) + "_r" + std::to_string(rows) + "_top" + std::to_string(g) + "of" +
         std::to_string(experts) + "_" + std::to_string(inter) + "x" + std::to_string(hidden) + "_" +
         RoutingName(routing) + (kernel == ExpertKernel::kTensorCore ? "_mma" : "_gemv");
}

constexpr ExpertKernel kGemv = ExpertKernel::kGemv, kMma = ExpertKernel::kTensorCore;
constexpr Routing kUniform = Routing::kUniform, kHot = Routing::kHot, kSkewed = Routing::kSkewed;

// Qwen3-30B-A3B's expert shape at the decode batches (both kernels, all
// three routings at 32 rows); prefill-sized batches on a smaller shape; f32
// and f16 on the GEMV; intermediate and hidden sizes off every tile (37 act
// features: a GEMV block's last units and a 64-feature tile's edge; hidden
// 1032: a K tail past the lanes' 16-byte vectors and the 32-wide k step).
INSTANTIATE_TEST_SUITE_P(
    Grid, CudaFusedExpertsTest,
    ::testing::Values(FusedParam{DType::kBF16, 1, 8, 128, 768, 2048, kUniform, kGemv},
                      FusedParam{DType::kBF16, 8, 8, 128, 768, 2048, kUniform, kGemv},
                      FusedParam{DType::kBF16, 32, 8, 128, 768, 2048, kUniform, kGemv},
                      FusedParam{DType::kBF16, 32, 8, 128, 768, 2048, kHot, kGemv},
                      FusedParam{DType::kBF16, 32, 8, 128, 768, 2048, kSkewed, kGemv},
                      FusedParam{DType::kBF16, 128, 8, 128, 768, 2048, kUniform, kGemv},
                      FusedParam{DType::kBF16, 1, 8, 128, 768, 2048, kUniform, kMma},
                      FusedParam{DType::kBF16, 32, 8, 128, 768, 2048, kUniform, kMma},
                      FusedParam{DType::kBF16, 32, 8, 128, 768, 2048, kHot, kMma},
                      FusedParam{DType::kBF16, 32, 8, 128, 768, 2048, kSkewed, kMma},
                      FusedParam{DType::kBF16, 128, 8, 128, 768, 2048, kSkewed, kMma},
                      FusedParam{DType::kBF16, 600, 8, 64, 96, 256, kUniform, kMma},
                      FusedParam{DType::kBF16, 600, 8, 64, 96, 256, kSkewed, kMma},
                      FusedParam{DType::kBF16, 600, 8, 64, 96, 256, kHot, kGemv},
                      FusedParam{DType::kF16, 300, 4, 16, 37, 1032, kSkewed, kMma},
                      FusedParam{DType::kF16, 7, 4, 16, 37, 1032, kHot, kGemv},
                      FusedParam{DType::kF32, 9, 2, 8, 37, 64, kSkewed, kGemv},
                      FusedParam{DType::kF32, 40, 4, 8, 96, 256, kHot, kGemv}),
    FusedName);

// A pair of no expert keeps its row; the kAuto choice runs either kernel.
TEST_F(CudaKernelsTest, FusedExpertsLeaveUngroupedPairsAndAutoPicksAKernel) {
  for (int64_t rows : {2, 100}) {  // 16 and 800 pairs: below and above kTensorCorePairs
    std::vector<int32_t> ids = Routes(rows, 8, 32, Routing::kUniform, 3);
    ids[5] = -1;
    const Groups groups = GroupsOf(ids, 32);
    const int64_t pairs = rows * 8;
    const Tensor x = Random({rows, 64}, DType::kBF16, 4);
    const Tensor gate_up = Random({32, 48, 64}, DType::kBF16, 5);
    const Tensor down = Random({32, 64, 24}, DType::kBF16, 6);
    const Tensor act = PoisonedHost({pairs, 24}, DType::kBF16);
    ASSERT_TRUE(ExpertGateUpSilu(x, gate_up, groups.cpu, act).ok());
    const Tensor out = PoisonedHost({pairs, 64}, DType::kBF16);
    ASSERT_TRUE(ExpertDown(act, down, groups.cpu, out).ok());
    const Tensor gact = PoisonedGpu({pairs, 24}, DType::kBF16), gout = PoisonedGpu({pairs, 64}, DType::kBF16);
    ASSERT_TRUE(ExpertGateUpSilu(OnGpu(x), OnGpu(gate_up), groups.gpu, gact).ok());
    ASSERT_TRUE(ExpertDown(OnGpu(act), OnGpu(down), groups.gpu, gout).ok());
    // One pair is in no group: the last act row and pair 5's out row stay poisoned.
    const Tolerance tol = FusedTolerance(DType::kBF16, 4e-3f);
    ExpectClose(gact.Rows(0, pairs - 1), act.Rows(0, pairs - 1), tol, "act, " + std::to_string(rows) + " rows");
    ExpectClose(gout.Rows(0, 5), out.Rows(0, 5), tol, "out before the ungrouped pair");
    ExpectClose(gout.Rows(6, pairs - 6), out.Rows(6, pairs - 6), tol, "out after the ungrouped pair");
    const absl::StatusOr<Tensor> host = gout.Rows(5, 1).To(Device::CPU());
    ASSERT_TRUE(host.ok()) << host.status();
    for (float v : host->ToFloats()) EXPECT_TRUE(std::isnan(v)) << "the ungrouped pair's row was written";
  }
}

TEST_F(CudaKernelsTest, TensorCoreExpertsRefuseF32AndRaggedRows) {
  const Groups groups = GroupsOf({0, 1}, 2);
  const Tensor x = OnGpu(Random({1, 16}, DType::kF32, 1));
  absl::Status s = ExpertGateUpSilu(x, OnGpu(Random({2, 8, 16}, DType::kF32, 2)), groups.gpu,
                                    PoisonedGpu({2, 4}, DType::kF32), ExpertKernel::kTensorCore);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented) << s;
  // 24-byte rows: no 16-byte vectors for the GEMV.
  s = ExpertDown(OnGpu(Random({2, 12}, DType::kBF16, 3)), OnGpu(Random({2, 8, 12}, DType::kBF16, 2)), groups.gpu,
                 PoisonedGpu({2, 8}, DType::kBF16), ExpertKernel::kGemv);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented) << s;
}

}  // namespace
}  // namespace seam::kernels::cuda_test
