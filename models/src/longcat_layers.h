// The compute modules of one LongCat-Flash layer on one rank: multi-head
// latent attention over the latent cache (absorbed form), and the shortcut
// MoE with zero-computation experts. Each returns an unreduced partial
// output. Private to the models library.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "seam/boundary/forward_batch.h"
#include "seam/boundary/residual_ops.h"
#include "seam/boundary/stage_boundary.h"
#include "seam/core/tensor.h"
#include "seam/models/kv_cache.h"
#include "src/load_context.h"
#include "src/qwen3_layers.h"
#include "src/routed_experts.h"

namespace seam::models::internal {

// MLA on one attention-TP rank (heads [r·Hq/atp, (r+1)·Hq/atp)):
//   q  = q_b(RMSNorm(q_a(x))) · sqrt(H / q_lora_rank), per head [nope | rope];
//   c  = RMSNorm(kv_a(x)[:Dc]) · sqrt(H / kv_lora_rank), k_pe = kv_a(x)[Dc:];
//   q_pe and k_pe roped with the interleaved pairs of transformers (the rope
//   rows are de-interleaved at load, so the NeoX rotation of
//   kernels::RotaryEmbedding gives the same products);
//   latent row [c | k_pe] written to the cache;
//   q_lat = [q_nope · W_UK, q_pe] per head; o_lat = PagedLatentAttention;
//   o = o_lat · W_UVᵀ per head; out = o_proj(o), a partial sum over attention TP.
// The two lora scales are folded into q_b's rows and kv_a_layernorm's weight.
class MlaAttention {
 public:
  // `prefix`: "model.layers.<l>.self_attn.<i>."
  static absl::StatusOr<MlaAttention> Load(const LoadContext& ctx, const std::string& prefix);
  // x: this DP group's rows [T, H] (T > 0); writes their latent rows into
  // layer `cache_layer` of the latent cache; returns [T, H].
  absl::StatusOr<Tensor> Forward(const Tensor& x, const CacheBatch& step, KvCache& cache, int64_t cache_layer) const;

 private:
  Tensor wqa_, q_norm_;    // [q_lora, H], [q_lora]
  Tensor wq_nope_, wq_pe_;  // [hl·nope, q_lora], [hl·rope, q_lora] (de-interleaved, scaled)
  Tensor wkc_, wkr_;        // [Dc, H], [rope, H] (de-interleaved)
  Tensor kv_norm_;          // [Dc], scaled
  Tensor uk_t_, uv_;  // stacked over local heads: W_UKᵀ [hl, Dc, nope], W_UV [hl, v, Dc]
  Tensor wo_;               // [H, hl·v]
  int64_t heads_ = 0, nope_ = 0, rope_ = 0, v_ = 0, dc_ = 0, hidden_ = 0;
  float theta_ = 1e7f, scale_ = 1.0f;
};

// The shortcut MoE: router (fp32, replicated; MoeRouteBiased on the device),
// routed experts sharded over TP (their intermediate) and run as Qwen3-MoE's
// (RoutedExperts), zero experts (identity, counted on rank 0 of the sum).
class LongcatMoe {
 public:
  // Routed experts one module each ("mlp.experts.<e>.gate_proj.weight", ...)
  // or stacked ("mlp.experts.gate_up_proj" [E or E + Z, 2·I, H] and
  // "mlp.experts.down_proj" [E, H, I]).
  static absl::StatusOr<LongcatMoe> Load(const LoadContext& ctx, const std::string& prefix);
  // x [N, H] (the FFN's rows; N may be 0) → partial [N, H] of `stage`'s sum.
  // No host round trip for N ≤ grouped_max_rows().
  absl::StatusOr<Tensor> Forward(const Tensor& x, const boundary::StageBoundary& stage,
                                 const boundary::ForwardBatch& batch) const;
  // The most rows a batch may have to run on the device only (0: never).
  int64_t grouped_max_rows() const { return experts_.grouped_max_rows(); }

 private:
  Tensor router_;           // f32 [E + Z, H]
  Tensor bias_;             // f32 e_score_correction_bias [E + Z]
  RoutedExperts experts_;   // the E routed experts, stacked
  int64_t top_k_ = 0;
  float scaling_ = 1.0f;
};

// One logical layer: its norms, modules and boundaries (main: attention and
// MoE; branch: dense MLP, attention, dense MLP).
struct LongcatLayer {
  int64_t global_layer = 0;
  boundary::NormParams attn_norm[2], mlp_norm[2];  // input_layernorm.i, post_attention_layernorm.i
  std::unique_ptr<MlaAttention> attn[2];
  std::unique_ptr<DenseMlp> mlp[2];
  std::unique_ptr<LongcatMoe> moe;
  std::shared_ptr<boundary::StageBoundary> attn_boundary, moe_boundary;
  std::vector<std::shared_ptr<boundary::StageBoundary>> branch;  // mlps.0, self_attn.1, mlps.1
};

}  // namespace seam::models::internal
