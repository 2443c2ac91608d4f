// RoutedExperts on one GPU under --moe-experts auto against each forced
// path (fused, grouped): auto times both at load (expert_path_choice.h) and
// runs each batch through the faster, so its expert outputs must equal the
// path its table names for the batch's rows bit for bit (the same kernels on
// the same rows) and agree with the other path within the tolerance the
// grouped-vs-fused comparisons already use:
// - f32: 1e-5 of the outputs' scale, as deferred_finalize_model_test's
//   agreement of the grouped, fused and per-expert ways (fp32 sums of the
//   same products in other orders);
// - bf16: 2^-5 of the outputs' scale, cuda_fused_experts_test's bf16
//   tolerance: the grouped path rounds g and u to bf16 before its separate
//   SiLU-mul where the fused one keeps them in fp32, ~2.8 bf16 ulps apart
//   in an activation.
// Also: every layer of one shape shares the first one's timings. Skips
// without a GPU.
#include <algorithm>
#include <iostream>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "seam/core/device_memory.h"
#include "seam/testing/tiny_checkpoint.h"
#include "src/load_context.h"
#include "src/routed_experts.h"

namespace seam::models::internal {
namespace {

constexpr int64_t kExperts = 16, kHidden = 256, kInter = 128, kTopK = 4;

Tensor RandomHost(const Shape& shape, DType dtype, uint32_t seed, float scale) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> v(-scale, scale);
  std::vector<float> values(static_cast<size_t>(NumElements(shape)));
  for (float& x : values) x = v(gen);
  return Tensor::FromFloats(values, shape, dtype);
}

// Each row's kTopK distinct experts, in no particular order (Run sorts them).
std::vector<int32_t> RandomIds(int64_t rows, uint32_t seed) {
  std::mt19937 gen(seed);
  std::vector<int32_t> ids;
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<int32_t> all;
    for (int32_t e = 0; e < kExperts; ++e) all.push_back(e);
    std::shuffle(all.begin(), all.end(), gen);
    ids.insert(ids.end(), all.begin(), all.begin() + kTopK);
  }
  return ids;
}

class CudaRoutedExperts : public ::testing::TestWithParam<DType> {
 protected:
  void SetUp() override {
    if (!CudaAvailable()) GTEST_SKIP() << "no CUDA device";
    ASSERT_TRUE(UseDevice(gpu_).ok());
    auto checkpoint = weights::Checkpoint::Open(testing::TinyCheckpointDir(true));
    ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
    checkpoint_ = std::move(*checkpoint);
  }

  RoutedExperts Load(MoeExperts way) {
    ModelOptions options{*boundary::Topology::Make(1, 1, 0), boundary::ReductionPolicy::kAr, GetParam()};
    options.device = gpu_;
    options.moe_experts = way;
    const LoadContext ctx{*checkpoint_, config_, AttentionShard{}, options};
    absl::StatusOr<RoutedExperts> experts = RoutedExperts::Load(ctx, kExperts, kTopK, [&](int64_t e) {
      const uint32_t seed = static_cast<uint32_t>(e) * 2;
      return absl::StatusOr<std::pair<Tensor, Tensor>>(
          std::make_pair(RandomHost({2 * kInter, kHidden}, GetParam(), seed + 1, 0.05f),
                         RandomHost({kHidden, kInter}, GetParam(), seed + 2, 0.05f)));
    });
    EXPECT_TRUE(experts.ok()) << experts.status();
    return experts.ok() ? std::move(*experts) : RoutedExperts();
  }

  // The [rows, K, H] expert outputs of one batch, on the host.
  Tensor Run(const RoutedExperts& experts, int64_t rows) {
    const Tensor x = *RandomHost({rows, kHidden}, GetParam(), 100 + static_cast<uint32_t>(rows), 1.0f).To(gpu_);
    const Tensor weights = *RandomHost({rows, kTopK}, DType::kF32, 7, 1.0f).To(gpu_);
    const Tensor ids = *Tensor::FromInts(RandomIds(rows, static_cast<uint32_t>(rows)), {rows, kTopK}).To(gpu_);
    absl::StatusOr<ExpertSlots> slots = experts.Run(x, weights, ids);
    EXPECT_TRUE(slots.ok()) << slots.status();
    if (!slots.ok()) return Tensor();
    absl::StatusOr<Tensor> host = slots->expert_out.To(Device::CPU());
    EXPECT_TRUE(host.ok()) << host.status();
    return host.ok() ? *host : Tensor();
  }

  const Device gpu_ = Device::CUDA(0);
  std::unique_ptr<weights::Checkpoint> checkpoint_;
  weights::ModelConfig config_;
};

TEST_P(CudaRoutedExperts, AutoEqualsItsChosenPathAndAgreesWithTheOther) {
  ClearExpertPathTables();
  const RoutedExperts autos = Load(MoeExperts::kAuto), fused = Load(MoeExperts::kFused),
                      grouped = Load(MoeExperts::kGrouped);
  ASSERT_FALSE(autos.path_table().empty()) << "auto on CUDA times both paths at load";
  EXPECT_EQ(autos.path_table().entries().front().timing.rows, 1);
  EXPECT_TRUE(fused.path_table().empty());
  EXPECT_TRUE(grouped.path_table().empty());
  EXPECT_EQ(fused.PathFor(32), ExpertPath::kFused);
  EXPECT_EQ(grouped.PathFor(32), ExpertPath::kGrouped);
  std::cout << autos.path_table().ToString() << "\n";
  const double tolerance = GetParam() == DType::kF32 ? 1e-5 : 1.0 / 32;
  for (int64_t rows : {1, 3, 8, 32, 100, 200}) {  // 200 rows: 800 pairs, the tensor-core kernel in bf16
    SCOPED_TRACE(::testing::Message() << rows << " rows");
    const ExpertPath path = autos.PathFor(rows);
    const Tensor a = Run(autos, rows), f = Run(fused, rows), g = Run(grouped, rows);
    ASSERT_TRUE(a.defined() && f.defined() && g.defined());
    const Tensor& same = path == ExpertPath::kFused ? f : g;
    const Tensor& other = path == ExpertPath::kFused ? g : f;
    EXPECT_EQ(testing::MaxRelativeError(a, same), 0) << "auto ran " << ExpertPathName(path);
    EXPECT_LE(testing::MaxRelativeError(a, other), tolerance);
  }
}

TEST_P(CudaRoutedExperts, LayersOfOneShapeShareTheFirstTiming) {
  ClearExpertPathTables();
  const RoutedExperts first = Load(MoeExperts::kAuto), second = Load(MoeExperts::kAuto);
  ASSERT_EQ(first.path_table().entries().size(), second.path_table().entries().size());
  for (size_t i = 0; i < first.path_table().entries().size(); ++i) {
    EXPECT_EQ(first.path_table().entries()[i].timing.fused_us, second.path_table().entries()[i].timing.fused_us);
  }
}

INSTANTIATE_TEST_SUITE_P(DTypes, CudaRoutedExperts, ::testing::Values(DType::kF32, DType::kBF16),
                         [](const ::testing::TestParamInfo<DType>& info) { return DTypeName(info.param); });

}  // namespace
}  // namespace seam::models::internal
