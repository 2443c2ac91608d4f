// The ops of a MoE with zero-computation experts (LongCat-Flash's) on CUDA
// against the CPU reference: MoeRouteBiased chooses the same experts (its
// probabilities follow the CPU's fp32 operations in the same order, so the
// biased choices compare alike) with weights within ToleranceFor(f32) (one
// exp each: the CUDA kernel's double exp rounded once against the host's
// expf), also replayed from a CUDA graph; IdentityExpertPairs copies rows or
// zeroes them exactly, leaving the other slots alone. Outputs are poisoned
// so that unwritten elements show.
#include <cmath>
#include <numeric>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "cuda_test_util.h"
#include "seam/kernels/moe_experts.h"
#include "seam/kernels/ops.h"

namespace seam::kernels::cuda_test {
namespace {

// (logits dtype, rows, experts: routed + zero)
using RouteParam = std::tuple<DType, int64_t, int64_t>;
class CudaMoeRouteBiasedTest : public CudaKernelsTest, public ::testing::WithParamInterface<RouteParam> {};

TEST_P(CudaMoeRouteBiasedTest, MatchesCpu) {
  const auto& [dtype, rows, experts] = GetParam();
  const Tensor logits = DistinctRows(rows, experts, dtype, static_cast<uint32_t>(rows + experts), 8.0f);
  // A bias of the probabilities' size, so that it changes choices.
  const Tensor bias = Random({experts}, DType::kF32, 3, -0.05f, 0.05f);
  for (int64_t top_k : {int64_t{1}, int64_t{2}, int64_t{12}}) {
    if (top_k > experts) continue;
    const Tensor weights = PoisonedHost({rows, top_k}, DType::kF32);
    const Tensor ids = Tensor::Empty({rows, top_k}, DType::kI32, Device::CPU());
    ASSERT_TRUE(MoeRouteBiased(logits, bias, top_k, 6.0f, weights, ids).ok());
    const Tensor gweights = PoisonedGpu({rows, top_k}, DType::kF32);
    const Tensor gids = PoisonedIndexGpu({rows, top_k});
    const absl::Status s = MoeRouteBiased(OnGpu(logits), OnGpu(bias), top_k, 6.0f, gweights, gids);
    ASSERT_TRUE(s.ok()) << s;
    const std::string what = "top_k " + std::to_string(top_k);
    EXPECT_EQ(ToInts(gids), HostInts(ids)) << what;
    ExpectClose(gweights, weights, ToleranceFor(DType::kF32), what);
  }
}

INSTANTIATE_TEST_SUITE_P(Grid, CudaMoeRouteBiasedTest,
                         ::testing::Combine(::testing::Values(DType::kF32, DType::kBF16),
                                            ::testing::Values<int64_t>(1, 7, 130),
                                            ::testing::Values<int64_t>(10, 96, 768)),
                         [](const ::testing::TestParamInfo<RouteParam>& info) {
                           return std::string(DTypeName(std::get<0>(info.param))) + "_" +
                                  std::to_string(std::get<1>(info.param)) + "x" +
                                  std::to_string(std::get<2>(info.param));
                         });

TEST_F(CudaKernelsTest, MoeRouteBiasedTiesGoToTheLowerIndex) {
  // Equal logits; the bias lifts expert 5 and ties experts 2 and 6.
  const Tensor logits = Tensor::FromFloats(std::vector<float>(8, 1.0f), {1, 8}, DType::kF32);
  const Tensor bias = Tensor::FromFloats({0.f, 0.f, 0.25f, 0.f, 0.f, 0.5f, 0.25f, 0.f}, {8}, DType::kF32);
  const Tensor gweights = PoisonedGpu({1, 4}, DType::kF32);
  const Tensor gids = PoisonedIndexGpu({1, 4});
  ASSERT_TRUE(MoeRouteBiased(OnGpu(logits), OnGpu(bias), 4, 2.0f, gweights, gids).ok());
  EXPECT_EQ(ToInts(gids), (std::vector<int32_t>{5, 2, 6, 0}));
  ExpectClose(gweights, Tensor::FromFloats({0.25f, 0.25f, 0.25f, 0.25f}, {1, 4}), kExact, "weights 1/8 · 2");
}

TEST_F(CudaKernelsTest, MoeRouteBiasedReplaysFromACudaGraph) {
  const Tensor logits = OnGpu(DistinctRows(32, 96, DType::kF32, 4, 8.0f));
  const Tensor bias = OnGpu(Random({96}, DType::kF32, 5, -0.05f, 0.05f));
  const Tensor weights = PoisonedHost({32, 12}, DType::kF32);
  const Tensor ids = Tensor::Empty({32, 12}, DType::kI32, Device::CPU());
  absl::StatusOr<Tensor> host_logits = logits.To(Device::CPU()), host_bias = bias.To(Device::CPU());
  ASSERT_TRUE(host_logits.ok() && host_bias.ok());
  ASSERT_TRUE(MoeRouteBiased(*host_logits, *host_bias, 12, 6.0f, weights, ids).ok());
  const Tensor gweights = PoisonedGpu({32, 12}, DType::kF32);
  const Tensor gids = PoisonedIndexGpu({32, 12});
  ExpectEagerAndGraphReplaysMatch([&] { return MoeRouteBiased(logits, bias, 12, 6.0f, gweights, gids); }, gweights,
                                  weights, ToleranceFor(DType::kF32));
  EXPECT_EQ(ToInts(gids), HostInts(ids));
}

TEST_F(CudaKernelsTest, IdentityExpertPairsMatchesCpu) {
  for (DType dtype : {DType::kF32, DType::kBF16}) {
    for (int64_t width : {64, 13}) {  // 16-byte units, and rows of odd length
      constexpr int64_t kRows = 9, kG = 6, kRouted = 8;
      std::mt19937 gen(static_cast<uint32_t>(width));
      std::vector<int32_t> routes(kRows * kG);
      for (int32_t& e : routes) e = static_cast<int32_t>(gen() % 12);  // 8 routed, 4 zero experts
      const Tensor ids = Tensor::FromInts(routes, {kRows, kG});
      const Tensor x = Random({kRows, width}, dtype, 6);
      for (bool copy : {true, false}) {
        const Tensor out = PoisonedHost({kRows * kG, width}, dtype);
        ASSERT_TRUE(IdentityExpertPairs(x, ids, kRouted, copy, out).ok());
        const Tensor gout = PoisonedGpu({kRows * kG, width}, dtype);
        ASSERT_TRUE(IdentityExpertPairs(OnGpu(x), OnGpu(ids), kRouted, copy, gout).ok());
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        absl::StatusOr<Tensor> got = gout.To(Device::CPU());
        ASSERT_TRUE(got.ok());
        const std::vector<float> a = got->ToFloats(), b = out.ToFloats();
        for (size_t i = 0; i < a.size(); ++i) {
          const bool both_nan = std::isnan(a[i]) && std::isnan(b[i]);  // a routed slot: written by neither
          EXPECT_TRUE(both_nan || a[i] == b[i]) << DTypeName(dtype) << " width " << width << " element " << i;
        }
      }
    }
  }
}

}  // namespace
}  // namespace seam::kernels::cuda_test
