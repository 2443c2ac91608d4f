// StepFloor: the bytes of a decode step and the FLOPs of a prefill, checked
// against sums written out by hand for the model of the serving-under-load
// figures (8 layers, hidden 4096, 32 heads / 8 KV heads of 128, intermediate
// 12288, vocab 32000, bf16) and for the tiny test models.
#include "seam/runtime/step_floor.h"

#include <gtest/gtest.h>


#include <cmath>

#include "seam/testing/tiny_checkpoint.h"

namespace seam::runtime {
namespace {

weights::ModelConfig LoadModel() { return testing::ServingLoadConfig(); }

// Parameters of one layer of LoadModel(): q, k, v, o, gate, up, down and four norms.
constexpr double kLayerParams = 4096.0 * 4096 * 2 + 1024.0 * 4096 * 2 + 3.0 * 12288 * 4096 + 2 * 4096 + 2 * 128;

TEST(StepFloor, KvOfTheLoadModelIs32KiBPerToken) {
  EXPECT_EQ(StepFloor::Of(LoadModel(), {}).kv_bytes_per_token(), 32768.0);
  StepFloorOptions f32;
  f32.cache_dtype = DType::kF32;
  EXPECT_EQ(StepFloor::Of(LoadModel(), f32).kv_bytes_per_token(), 65536.0);
}

TEST(StepFloor, DecodeStepReadsEveryWeightOnceAndEachSequencesContext) {
  const StepFloor floor = StepFloor::Of(LoadModel(), {});
  const DecodeStepBytes step = floor.DecodeStep(/*batch=*/256, /*context_tokens=*/256 * 1088);
  // Layers, the final norm and the lm_head, and one embedding row per sequence.
  const double weights = 2.0 * (8 * kLayerParams + 4096 + 32000.0 * 4096 + 256 * 4096);
  EXPECT_DOUBLE_EQ(step.weights, weights);
  EXPECT_NEAR(step.weights / 1e9, 3.35, 0.01);
  EXPECT_DOUBLE_EQ(step.kv, 32768.0 * (256 * 1088 + 256));  // read the context, write the new token
  EXPECT_EQ(step.state, 0);
  EXPECT_EQ(step.experts, 0);
  EXPECT_DOUBLE_EQ(step.total(), step.weights + step.kv);
}

TEST(StepFloor, TensorParallelRanksReadTheirShare) {
  StepFloorOptions tp2;
  tp2.tp = 2;
  const StepFloor whole = StepFloor::Of(LoadModel(), {}), half = StepFloor::Of(LoadModel(), tp2);
  EXPECT_EQ(half.kv_bytes_per_token(), 16384.0);  // 4 of the 8 KV heads
  const double norms = 8 * (2 * 4096 + 2 * 128) + 4096, row = 4096;
  EXPECT_DOUBLE_EQ(half.DecodeStep(1, 0).weights, (whole.DecodeStep(1, 0).weights - 2 * (norms + row)) / 2 +
                                                      2 * (norms + row));
  // Attention DP 2 of TP 2: attention whole per rank, half the sequences' KV.
  StepFloorOptions dp2 = tp2;
  dp2.attn_dp = 2;
  const StepFloor dp = StepFloor::Of(LoadModel(), dp2);
  EXPECT_EQ(dp.kv_bytes_per_token(), 32768.0);
  EXPECT_DOUBLE_EQ(dp.DecodeStep(4, 400).kv, 32768.0 * 404 / 2);
  // More attention-TP ranks than KV heads: each rank keeps one head.
  StepFloorOptions tp16;
  tp16.tp = 16;
  EXPECT_EQ(StepFloor::Of(LoadModel(), tp16).kv_bytes_per_token(), 8 * 2 * 128 * 2.0);
}

TEST(StepFloor, PipelineStagesSplitTheLayers) {
  StepFloorOptions first, second;
  first.end_layer = 3;
  second.first_layer = 3;
  const double whole = StepFloor::Of(LoadModel(), {}).DecodeStep(2, 100).total();
  const DecodeStepBytes a = StepFloor::Of(LoadModel(), first).DecodeStep(2, 100);
  const DecodeStepBytes b = StepFloor::Of(LoadModel(), second).DecodeStep(2, 100);
  EXPECT_DOUBLE_EQ(a.total() + b.total(), whole);
  EXPECT_DOUBLE_EQ(a.kv, 3 * 4096.0 * 102);  // 3 layers x K and V x 8 x 128 x 2 bytes per token
  EXPECT_DOUBLE_EQ(a.weights, 2.0 * (3 * kLayerParams + 2 * 4096));  // no final norm or lm_head
}

TEST(StepFloor, ExpectedExpertsTouchedFollowsUniformRouting) {
  EXPECT_DOUBLE_EQ(ExpectedExpertsTouched(128, 8, 1), 8.0);
  EXPECT_NEAR(ExpectedExpertsTouched(128, 8, 2), 128 * (1 - (120.0 / 128) * (120.0 / 128)), 1e-9);
  EXPECT_NEAR(ExpectedExpertsTouched(128, 8, 1024), 128.0, 1e-9);
  EXPECT_EQ(ExpectedExpertsTouched(4, 8, 3), 4.0);  // top-k above E touches every expert
  EXPECT_EQ(ExpectedExpertsTouched(0, 2, 3), 0.0);
}

TEST(StepFloor, MoeStepReadsTheExpertsItsBatchTouches) {
  const weights::ModelConfig c = testing::TinyConfig(/*moe=*/true);  // 4 experts, top-2, moe_intermediate 32
  const StepFloor floor = StepFloor::Of(c, {});
  const double expert = 3.0 * 64 * 32 * 2, layers = static_cast<double>(c.num_hidden_layers);
  EXPECT_DOUBLE_EQ(floor.DecodeStep(1, 10).experts, layers * 2 * expert);
  EXPECT_DOUBLE_EQ(floor.DecodeStep(3, 10).experts, layers * ExpectedExpertsTouched(4, 2, 3) * expert);
  EXPECT_LT(floor.DecodeStep(1, 10).weights, floor.DecodeStep(3, 10).weights);
}

TEST(StepFloor, ZeroExpertsShareTheRoutingAndReadNothing) {
  EXPECT_DOUBLE_EQ(ExpectedRoutedExpertsTouched(128, 0, 8, 5), ExpectedExpertsTouched(128, 8, 5));
  // One row: top_k slots over E + Z, E / (E + Z) of them routed.
  EXPECT_DOUBLE_EQ(ExpectedRoutedExpertsTouched(64, 32, 12, 1), 64 * (1 - (1 - 12.0 / 96)));
  EXPECT_NEAR(ExpectedRoutedExpertsTouched(64, 32, 12, 32), 64 * (1 - std::pow(84.0 / 96, 32)), 1e-9);
  EXPECT_NEAR(ExpectedRoutedExpertsTouched(64, 32, 12, 4096), 64.0, 1e-9);
  EXPECT_EQ(ExpectedRoutedExpertsTouched(0, 4, 2, 3), 0.0);
}

// The tiny LongCat-Flash (hidden 64, 4 heads, MLA q 48 / kv 32 / nope 16 /
// rope 8 / v 16, dense MLPs of 96, 8 routed experts of 32 + 2 zero experts,
// top-2, vocab 128, 2 logical layers of two attentions each), f32: every
// byte written out from transformers' tensor list. Sums with fractional
// expert shares compare within 1e-12 relative (summation order only).
TEST(StepFloor, LongcatFlashCountsItsTensorsLatentCacheAndZeroExperts) {
  const weights::ModelConfig c = testing::TinyLongcatFlashConfig();
  StepFloorOptions o;
  o.weight_dtype = o.cache_dtype = DType::kF32;
  const StepFloor floor = StepFloor::Of(c, o);
  const double attention = 48.0 * 64 + 48 + 4 * 24 * 48 + 40.0 * 64 + 32 + 4 * 32 * 32 + 64.0 * 64;
  const double sublayer = 2 * 64 + attention + 3.0 * 96 * 64;  // two norms, one attention, one dense MLP
  const double router = 10.0 * 64 + 10, expert = 3.0 * 32 * 64;
  const double dense = 2 * (2 * sublayer + router) + 64 + 128.0 * 64;  // + final norm, lm_head
  const DecodeStepBytes one = floor.DecodeStep(1, 9);
  // One token touches 2 of 10 slots, 8/10 of them routed: 1.6 experts per layer.
  EXPECT_NEAR(one.experts, 4.0 * 2 * 1.6 * expert, 1e-9 * one.experts);
  EXPECT_NEAR(one.weights, 4.0 * (dense + 64) + one.experts, 1e-12 * one.weights);  // + the token's embedding row
  // The latent cache: 4 attentions x (kv_lora_rank 32 + rope 8) fp32 per token.
  EXPECT_DOUBLE_EQ(floor.kv_bytes_per_token(), 4.0 * 4 * 40);
  EXPECT_DOUBLE_EQ(one.kv, 4.0 * 4 * 40 * 10);
  // TP 2: the router is read whole, as are the norms; the matrices half.
  StepFloorOptions tp2 = o;
  tp2.tp = 2;
  const double norms = 2 * (4 * 64 + 2 * (48 + 32)) + 64;
  const DecodeStepBytes half = StepFloor::Of(c, tp2).DecodeStep(1, 9);
  EXPECT_NEAR(half.weights, 4.0 * ((dense - norms - 2 * router) / 2 + norms + 2 * router + 64) + one.experts / 2,
              1e-12 * half.weights);
  // A prefill token's matmuls: every dense matrix, the routed share 2/10 of every expert.
  const double matrices = 2 * (2 * (attention - 48 - 32 + 3.0 * 96 * 64) + 10.0 * 64) + 2 * 8 * 0.2 * expert;
  EXPECT_NEAR(floor.Prefill(1).matmul, 2.0 * matrices + 2.0 * 128 * 64, 1e-12 * matrices);
}

TEST(StepFloor, MambaStateIsReadAndWrittenOncePerSequence) {
  const weights::ModelConfig c = testing::TinyNemotronHConfig();  // "MM*--M*-"
  const StepFloor floor = StepFloor::Of(c, {});
  const double per_layer = 3.0 * c.mamba_conv_dim() + 8.0 * 8 * 16;
  EXPECT_DOUBLE_EQ(floor.state_bytes_per_sequence(), 4.0 * 3 * per_layer);
  EXPECT_DOUBLE_EQ(floor.DecodeStep(5, 50).state, 2 * 5 * 4.0 * 3 * per_layer);
  EXPECT_DOUBLE_EQ(floor.kv_bytes_per_token(), 2.0 * 2 * 4 * 8 * 2);  // 2 attention layers
}

TEST(StepFloor, PrefillCountsMatmulsOncePerTokenAndCausalAttentionPairs) {
  const StepFloor floor = StepFloor::Of(LoadModel(), {});
  const double matrices = 8 * (kLayerParams - (2 * 4096 + 2 * 128));
  const PrefillFlops one = floor.Prefill(1000);
  EXPECT_DOUBLE_EQ(one.matmul, 2.0 * matrices * 1000 + 2.0 * 32000 * 4096);
  EXPECT_DOUBLE_EQ(one.attention, 4.0 * (1000.0 * 1001 / 2) * 32 * 128 * 8);
  // After a cached prefix of 500 tokens, 100 new ones attend it and each other.
  EXPECT_DOUBLE_EQ(floor.Prefill(100, 500).attention, 4.0 * (100.0 * 500 + 100.0 * 101 / 2) * 32 * 128 * 8);
  EXPECT_EQ(floor.Prefill(0).total(), 0);
}

}  // namespace
}  // namespace seam::runtime
