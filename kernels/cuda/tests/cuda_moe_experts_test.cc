// The device-side expert ops (seam/kernels/moe_experts.h) on CUDA against
// the CPU reference: routes sorted by expert and pairs grouped by expert
// exactly (the order of an expert's pairs is unspecified on CUDA: compared
// as a set), ExpertMatmul within the matmul tolerance (both sum in fp32, in
// other orders: cuda_matmul_test.cc's reasoning), MoeFinalize within one
// fp32 rounding per term (CUDA fuses each multiply-add), the pairs' rows
// gathered and scattered exactly. Outputs are poisoned so that unwritten
// elements show.
#include <algorithm>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "cuda_test_util.h"
#include "seam/kernels/moe_experts.h"
#include "seam/kernels/ops.h"

namespace seam::kernels::cuda_test {
namespace {

// Routes of `rows` rows over `experts` experts, g distinct ids a row; with
// `hot`, every row routes to expert 0 too (an expert with more than the
// kernel's 8 pairs a pass).
std::vector<int32_t> RandomRoutes(int64_t rows, int64_t g, int64_t experts, bool hot, uint32_t seed) {
  std::mt19937 gen(seed);
  std::vector<int32_t> ids;
  std::vector<int32_t> all(experts);
  for (int64_t e = 0; e < experts; ++e) all[e] = static_cast<int32_t>(e);
  for (int64_t r = 0; r < rows; ++r) {
    std::shuffle(all.begin(), all.end(), gen);
    if (hot) std::iter_swap(all.begin(), std::find(all.begin(), all.end(), 0));
    ids.insert(ids.end(), all.begin(), all.begin() + g);
  }
  return ids;
}

ExpertGroups GroupsOn(Device device, const std::vector<int32_t>& ids, int64_t experts) {
  const int64_t pairs = static_cast<int64_t>(ids.size());
  absl::StatusOr<ExpertGroups> g = ExpertGroups::Empty(experts, pairs, device);
  EXPECT_TRUE(g.ok()) << g.status();
  Tensor t = Tensor::FromInts(ids, {pairs});
  if (device.is_cuda()) t = OnGpu(t);
  const absl::Status s = GroupByExpert(t, *g);
  EXPECT_TRUE(s.ok()) << s;
  return *g;
}

std::vector<int32_t> HostInts(const Tensor& t) {
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  absl::StatusOr<Tensor> h = t.To(Device::CPU());
  EXPECT_TRUE(h.ok()) << h.status();
  return std::vector<int32_t>(h->data<int32_t>(), h->data<int32_t>() + h->numel());
}

// Rows sorted in registers (up to 16 routes) and in place (17, 40), some
// with two pairs of no expert (-1, equal ids keep their order).
TEST_F(CudaKernelsTest, SortRoutesByExpertMatchesCpu) {
  constexpr int64_t kRows = 37;
  for (int64_t g : {2, 8, 12, 16, 17, 40}) {
    std::vector<int32_t> ids = RandomRoutes(kRows, g, 128, false, static_cast<uint32_t>(5 + g));
    for (int64_t r = 0; r < kRows; r += 3) ids[r * g] = ids[r * g + g - 1] = -1;
    const Tensor weights = Random({kRows, g}, DType::kF32, 6, 0.0f, 1.0f);
    const Tensor host_ids = Tensor::FromInts(ids, {kRows, g});
    const Tensor gpu_ids = OnGpu(host_ids), gpu_weights = OnGpu(weights);
    ASSERT_TRUE(SortRoutesByExpert(weights, host_ids).ok());
    ASSERT_TRUE(SortRoutesByExpert(gpu_weights, gpu_ids).ok());
    EXPECT_EQ(HostInts(gpu_ids), HostInts(host_ids)) << "g=" << g;
    ExpectClose(gpu_weights, weights, kExact, "sorted weights, g=" + std::to_string(g));
  }
}

// (experts, rows, routes per row)
using GroupParam = std::tuple<int64_t, int64_t, int64_t>;
class CudaGroupByExpertTest : public CudaKernelsTest, public ::testing::WithParamInterface<GroupParam> {};

TEST_P(CudaGroupByExpertTest, MatchesCpu) {
  const auto& [experts, rows, g] = GetParam();
  std::vector<int32_t> ids = RandomRoutes(rows, g, experts, false, static_cast<uint32_t>(experts + rows));
  if (!ids.empty()) ids[ids.size() / 2] = -1;  // a pair of no expert
  const ExpertGroups cpu = GroupsOn(Device::CPU(), ids, experts);
  const ExpertGroups gpu = GroupsOn(Gpu(), ids, experts);
  const std::vector<int32_t> offsets = HostInts(gpu.offsets), want_offsets = HostInts(cpu.offsets);
  ASSERT_EQ(offsets, want_offsets);
  const std::vector<int32_t> active = HostInts(gpu.active), want_active = HostInts(cpu.active);
  ASSERT_EQ(active[0], want_active[0]);
  EXPECT_TRUE(std::equal(active.begin(), active.begin() + 1 + active[0], want_active.begin()));
  const std::vector<int32_t> tiles = HostInts(gpu.tile_starts), want_tiles = HostInts(cpu.tile_starts);
  EXPECT_TRUE(std::equal(tiles.begin(), tiles.begin() + 1 + active[0], want_tiles.begin())) << "tile starts";
  std::vector<int32_t> order = HostInts(gpu.order), want_order = HostInts(cpu.order);
  for (int64_t e = 0; e < experts; ++e) {
    std::sort(order.begin() + offsets[e], order.begin() + offsets[e + 1]);
    ASSERT_TRUE(std::equal(order.begin() + offsets[e], order.begin() + offsets[e + 1],
                           want_order.begin() + offsets[e]))
        << "expert " << e;
  }
}

INSTANTIATE_TEST_SUITE_P(Grid, CudaGroupByExpertTest,
                         ::testing::Values(GroupParam{4, 1, 2}, GroupParam{4, 3, 2}, GroupParam{128, 1, 8},
                                           GroupParam{128, 32, 8}, GroupParam{128, 512, 8},
                                           GroupParam{3000, 64, 16}, GroupParam{4096, 4, 4}));

// (dtype, rows, routes per row, experts, N, K, hot expert)
using MatmulParam = std::tuple<DType, int64_t, int64_t, int64_t, int64_t, int64_t, bool>;
class CudaExpertMatmulTest : public CudaKernelsTest, public ::testing::WithParamInterface<MatmulParam> {};

TEST_P(CudaExpertMatmulTest, MatchesCpu) {
  const auto& [dtype, rows, g, experts, n, k, hot] = GetParam();
  const uint32_t seed = static_cast<uint32_t>(rows * 31 + n * 7 + k);
  const std::vector<int32_t> ids = RandomRoutes(rows, g, experts, hot, seed);
  const Tensor x = Random({rows, k}, dtype, seed + 1);
  const Tensor w = Random({experts, n, k}, dtype, seed + 2);
  const Tensor out = PoisonedHost({rows * g, n}, dtype);
  ASSERT_TRUE(ExpertMatmul(x, w, GroupsOn(Device::CPU(), ids, experts), out).ok());
  const Tensor gout = PoisonedGpu({rows * g, n}, dtype);
  const absl::Status s = ExpertMatmul(OnGpu(x), OnGpu(w), GroupsOn(Gpu(), ids, experts), gout);
  ASSERT_TRUE(s.ok()) << s;
  Tolerance tol = ToleranceFor(dtype);
  tol.atol = dtype == DType::kF32 ? 1e-4f : 4e-3f;  // cancellation over K terms (cuda_matmul_test.cc)
  ExpectClose(gout, out, tol, std::string(DTypeName(dtype)) + " expert matmul");
}

// One x row per pair (the down projection's shape) and a pair of no expert.
TEST_F(CudaKernelsTest, ExpertMatmulOneRowPerPairLeavesUngroupedRows) {
  const std::vector<int32_t> ids = {2, -1, 0, 2, 2};
  const Tensor x = Random({5, 64}, DType::kBF16, 3);
  const Tensor w = Random({3, 24, 64}, DType::kBF16, 4);
  const Tensor out = PoisonedHost({5, 24}, DType::kBF16);
  ASSERT_TRUE(ExpertMatmul(x, w, GroupsOn(Device::CPU(), ids, 3), out).ok());
  const Tensor gout = PoisonedGpu({5, 24}, DType::kBF16);
  ASSERT_TRUE(ExpertMatmul(OnGpu(x), OnGpu(w), GroupsOn(Gpu(), ids, 3), gout).ok());
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  absl::StatusOr<Tensor> got = gout.To(Device::CPU());
  ASSERT_TRUE(got.ok());
  for (int64_t p : {0, 2, 3, 4}) {
    ExpectClose(OnGpu(got->Rows(p, 1)), out.Rows(p, 1), {1.0f / 128, 4e-3f}, "pair " + std::to_string(p));
  }
  for (float v : got->Rows(1, 1).ToFloats()) EXPECT_TRUE(std::isnan(v)) << "the ungrouped pair's row was written";
}

TEST_F(CudaKernelsTest, ExpertMatmulRefusesRowsItCannotVectorise) {
  const std::vector<int32_t> ids = {0, 1};
  const Tensor x = OnGpu(Random({1, 12}, DType::kBF16, 1));  // 24-byte rows
  const Tensor w = OnGpu(Random({2, 4, 12}, DType::kBF16, 2));
  const absl::Status s = ExpertMatmul(x, w, GroupsOn(Gpu(), ids, 2), PoisonedGpu({2, 4}, DType::kBF16));
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented) << s;
}

std::string MatmulName(const ::testing::TestParamInfo<MatmulParam>& info) {
  const auto& [dtype, rows, g, experts, n, k, hot] = info.param;
  return std::string(DTypeName(dtype)) + "_r" + std::to_string(rows) + "_g" + std::to_string(g) + "_e" +
         std::to_string(experts) + "_" + std::to_string(n) + "x" + std::to_string(k) + (hot ? "_hot" : "");
}

// Decode-like (1-32 rows, top-2/8 of 4-128 experts), a prefill-like 300 rows,
// an expert holding every row (more than one pass), N not a multiple of a
// block's 8 features, K with and without the unrolled chunks' tail.
INSTANTIATE_TEST_SUITE_P(
    Grid, CudaExpertMatmulTest,
    ::testing::Values(MatmulParam{DType::kF32, 1, 2, 4, 96, 64, false},
                      MatmulParam{DType::kBF16, 1, 8, 128, 1536, 2048, false},
                      MatmulParam{DType::kBF16, 32, 8, 128, 2048, 768, false},
                      MatmulParam{DType::kBF16, 32, 8, 128, 200, 768, true},
                      MatmulParam{DType::kF16, 7, 4, 16, 37, 1000, true},
                      MatmulParam{DType::kF32, 300, 2, 8, 130, 256, false},
                      MatmulParam{DType::kBF16, 300, 8, 64, 64, 1032, true}),
    MatmulName);

TEST_F(CudaKernelsTest, GatherAndScatterPairsMatchCpu) {
  for (DType dtype : {DType::kF32, DType::kBF16}) {
    for (int64_t width : {64, 13}) {  // 16-byte units, and rows of odd length
      std::vector<int32_t> ids = RandomRoutes(40, 4, 16, true, 11);
      ids[7] = -1;
      const Tensor x = Random({40, width}, dtype, 12);
      const Tensor rows = PoisonedHost({160, width}, dtype);
      ASSERT_TRUE(GatherPairs(x, GroupsOn(Device::CPU(), ids, 16), rows).ok());
      const ExpertGroups g = GroupsOn(Gpu(), ids, 16);
      const Tensor grows = PoisonedGpu({160, width}, dtype);
      ASSERT_TRUE(GatherPairs(OnGpu(x), g, grows).ok());
      // The order inside an expert differs on CUDA: compare after scattering back.
      const Tensor back = PoisonedHost({160, width}, dtype);
      ASSERT_TRUE(ScatterPairs(rows, GroupsOn(Device::CPU(), ids, 16), back).ok());
      const Tensor gback = PoisonedGpu({160, width}, dtype);
      ASSERT_TRUE(ScatterPairs(grows, g, gback).ok());
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      absl::StatusOr<Tensor> got = gback.To(Device::CPU());
      ASSERT_TRUE(got.ok());
      const std::vector<float> a = got->ToFloats(), b = back.ToFloats();
      for (size_t i = 0; i < a.size(); ++i) {
        const bool both_nan = std::isnan(a[i]) && std::isnan(b[i]);  // pair 7's row: written by neither
        EXPECT_TRUE(both_nan || a[i] == b[i]) << DTypeName(dtype) << " width " << width << " element " << i;
      }
    }
  }
}

TEST_F(CudaKernelsTest, MoeFinalizeMatchesCpu) {
  for (DType dtype : {DType::kF32, DType::kBF16}) {
    const Tensor y = Random({9, 8, 200}, dtype, 7);
    const Tensor scales = Random({9, 8}, DType::kF32, 8, 0.0f, 1.0f);
    const Tensor out = PoisonedHost({9, 200}, dtype);
    ASSERT_TRUE(MoeFinalize(y, scales, out).ok());
    const Tensor gout = PoisonedGpu({9, 200}, dtype);
    ASSERT_TRUE(MoeFinalize(OnGpu(y), OnGpu(scales), gout).ok());
    ExpectClose(gout, out, ToleranceFor(dtype), std::string(DTypeName(dtype)) + " finalize");
  }
}

}  // namespace
}  // namespace seam::kernels::cuda_test
