// LongCat-Flash's pieces that need no ranks: the router over routed and
// zero-computation experts (the score-correction bias chooses, the unbiased
// scores weigh), and the latent KV cache's sizing.
#include <cmath>
#include <vector>

#include <gtest/gtest.h>

#include "seam/models/kv_cache.h"
#include "src/longcat_layers.h"

namespace seam::models::internal {
namespace {

std::vector<float> Softmax(const std::vector<float>& l) {
  float most = l[0], sum = 0.0f;
  for (float v : l) most = std::max(most, v);
  std::vector<float> p;
  for (float v : l) sum += std::exp(v - most);
  for (float v : l) p.push_back(std::exp(v - most) / sum);
  return p;
}

TEST(LongcatRouting, TheBiasChoosesAndTheUnbiasedScoresWeigh) {
  // Experts 0..2 routed, 3..4 zero experts. Scores favour 0 and 1; the bias
  // lifts zero expert 4 above expert 1.
  const std::vector<float> logits = {2.0f, 1.0f, 0.0f, -1.0f, 0.5f};
  const std::vector<float> bias = {0.0f, 0.0f, 0.0f, 0.0f, 0.2f};
  const std::vector<float> p = Softmax(logits);
  ASSERT_LT(p[4], p[1]);
  ASSERT_GT(p[4] + 0.2f, p[1]);
  const std::vector<RowRoutes> routes = RouteWithZeroExperts(logits, 1, 5, bias, 2, 2.5f);
  ASSERT_EQ(routes.size(), 1u);
  EXPECT_EQ(routes[0].experts, (std::vector<int32_t>{0, 4}));
  ASSERT_EQ(routes[0].weights.size(), 2u);
  EXPECT_FLOAT_EQ(routes[0].weights[0], p[0] * 2.5f);
  EXPECT_FLOAT_EQ(routes[0].weights[1], p[4] * 2.5f);  // unbiased, not renormalised
}

TEST(LongcatRouting, TiesGoToTheLowerIndexRowByRow) {
  const std::vector<float> logits = {0.0f, 0.0f, 0.0f, 1.0f, 0.0f, 0.0f};
  const std::vector<float> bias(3, 0.0f);
  const std::vector<RowRoutes> routes = RouteWithZeroExperts(logits, 2, 3, bias, 2, 1.0f);
  EXPECT_EQ(routes[0].experts, (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(routes[1].experts, (std::vector<int32_t>{0, 1}));
  EXPECT_FLOAT_EQ(routes[0].weights[0], 1.0f / 3.0f);
  EXPECT_GT(routes[1].weights[0], routes[1].weights[1]);
}

TEST(LatentKvCache, ABlockCostsOneLatentRowPerTokenAndLayer) {
  KvCacheOptions options;
  options.block_size = 16;
  options.budget_bytes = 4 * 16 * 40 * 4 * 10 + 100;  // ten blocks of 4 layers, rows of 40 f32
  auto cache = KvCache::CreateLatent(4, 40, options);
  ASSERT_TRUE(cache.ok()) << cache.status();
  EXPECT_TRUE((*cache)->is_latent());
  EXPECT_EQ((*cache)->bytes_per_block(), 4 * 16 * 40 * 4);
  EXPECT_EQ((*cache)->num_blocks(), 10);
  EXPECT_EQ((*cache)->latent(3).shape(), (Shape{10, 16, 40}));
  // The same budget as a GQA cache of 4 heads of 24 (q·k of nope 16 + rope 8, v 24) holds far fewer blocks.
  auto gqa = KvCache::Create(4, 4, 24, options);
  ASSERT_TRUE(gqa.ok());
  EXPECT_LT((*gqa)->num_blocks(), (*cache)->num_blocks());
  EXPECT_EQ(KvCache::CreateLatent(4, 0, options).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace seam::models::internal
