// The models on one GPU: the tiny Qwen3 and Qwen3-MoE checkpoints run on
// CUDA give the CPU's logits (prefill of mixed lengths, then cached decode),
// and a decode step replayed from a CUDA graph gives the eager step's logits
// (MoE too: its experts run grouped on the device).
// Every test skips when no GPU is visible.
#include <gtest/gtest.h>

#include "loaded_model.h"

#include "seam/core/device_memory.h"
#include "seam/core/status.h"
#include "seam/kernels/ops.h"
#include "seam/kernels/stream.h"
#include "seam/runtime/decode_graph.h"
#include "seam/models/qwen3_model.h"
#include "seam/testing/tiny_checkpoint.h"

namespace seam::runtime {
namespace {

using testing::TinyCheckpointDir;

// f32 on both sides: cuBLAS and OpenBLAS sum in different orders, attention
// and norms reduce in different orders; over 2 layers that stays within a
// few hundred fp32 ulps of the logits' scale.
constexpr double kF32Tolerance = 1e-4;
// bf16 weights and activations on both sides; each rounds its own fp32
// intermediates to bf16 (2^-8 relative) at every op boundary, so a few
// bf16 ulps of the logits' scale.
constexpr double kBf16Tolerance = 5e-2;

using Loaded = model_testing::LoadedModel;

Loaded Load(bool moe, DType dtype, Device device) {
  return model_testing::LoadWholeModel(TinyCheckpointDir(moe), dtype, device);
}


class CudaModel : public ::testing::TestWithParam<std::tuple<bool, DType>> {
 protected:
  void SetUp() override {
    if (!CudaAvailable()) GTEST_SKIP() << "no CUDA device visible; GPU model tests skipped";
  }
  bool moe() const { return std::get<0>(GetParam()); }
  DType dtype() const { return std::get<1>(GetParam()); }
  double tolerance() const { return dtype() == DType::kF32 ? kF32Tolerance : kBf16Tolerance; }
};

TEST_P(CudaModel, PrefillAndDecodeMatchTheCpu) {
  Loaded cpu = Load(moe(), dtype(), Device::CPU());
  Loaded gpu = Load(moe(), dtype(), Device::CUDA(0));
  model_testing::ExpectPrefillAndDecodeMatch(cpu, gpu, tolerance(), /*late_joiner=*/false);
}

TEST_P(CudaModel, GraphDecodeEqualsEagerDecode) {
  Loaded eager = Load(moe(), dtype(), Device::CUDA(0));
  Loaded graphed = Load(moe(), dtype(), Device::CUDA(0));
  const int64_t b = 3;
  std::unique_ptr<DecodeGraph> graph = model_testing::CheckGraphStepsAgainstEager(eager, graphed, b, 20);
  ASSERT_NE(graph, nullptr);
  models::StepInput too_many{{}, false};
  for (int64_t i = 0; i <= b; ++i) too_many.sequences.push_back(models::SequenceStep{uint64_t(i), {1}, 30});
  EXPECT_EQ(graph->Step(too_many).status().code(), absl::StatusCode::kInvalidArgument);
  models::StepInput prefill_step{{models::SequenceStep{0, {1, 2}, 30}}, false};
  EXPECT_EQ(graph->Step(prefill_step).status().code(), absl::StatusCode::kInvalidArgument);
  models::StepInput too_long{{}, false};
  for (int64_t i = 0; i < b; ++i) too_long.sequences.push_back(models::SequenceStep{uint64_t(i), {1}, 64});
  EXPECT_EQ(graph->Step(too_long).status().code(), absl::StatusCode::kOutOfRange);
}

INSTANTIATE_TEST_SUITE_P(Models, CudaModel,
                         ::testing::Combine(::testing::Bool(), ::testing::Values(DType::kF32, DType::kBF16)),
                         [](const auto& info) {
                           return std::string(std::get<0>(info.param) ? "Moe" : "Dense") +
                                  (std::get<1>(info.param) == DType::kF32 ? "F32" : "Bf16");
                         });

}  // namespace
}  // namespace seam::runtime
