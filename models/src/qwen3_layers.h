// The compute modules of one Qwen3 decoder layer on one rank: attention over
// the paged KV cache, the dense MLP and the sparse MoE block. Each loads only
// this rank's shards and returns an unreduced partial output. Private to
// the models library.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "seam/boundary/deferred_finalize.h"
#include "seam/boundary/layout.h"
#include "seam/boundary/residual_ops.h"
#include "seam/boundary/stage_boundary.h"
#include "seam/core/tensor.h"
#include "seam/kernels/moe_experts.h"
#include "seam/models/kv_cache.h"
#include "seam/models/qwen3_model.h"
#include "src/cp_attention.h"
#include "src/load_context.h"
#include "src/routed_experts.h"
#include "seam/weights/checkpoint.h"

namespace seam::models::internal {

// "model.layers.<layer>.<suffix>".
std::string LayerName(int64_t layer, const std::string& suffix);

class Attention {
 public:
  static absl::StatusOr<Attention> Load(const LoadContext& ctx, int64_t layer);
  // x: this DP group's rows [T, H] (T > 0). Writes this step's k and v into
  // the cache of `cache_layer`; returns the o_proj partial sum [T, H].
  absl::StatusOr<Tensor> Forward(const Tensor& x, const CacheBatch& step, KvCache& cache,
                                 int64_t cache_layer) const;
  // A context-parallel batch: x holds this rank's CP rows [t, H] (t may be
  // 0; every CP rank calls it, since it joins the context gather). Projects
  // its rows, gathers every rank's q|k|v into natural order through the
  // boundary, writes k and v of every row into the cache, and attends its
  // own rows against their sequences' whole prefix. Returns [t, H].
  absl::StatusOr<Tensor> ForwardContextParallel(const Tensor& x, const CacheBatch& step, KvCache& cache,
                                                int64_t cache_layer, boundary::ForwardBatch& batch,
                                                const CpAttention& cp) const;

 private:
  Tensor wqkv_, wo_;          // [(qh + 2·kvh)·D, H]: q, k, v rows; [H, qh·D]
  Tensor q_norm_, k_norm_;    // [D]
  int64_t q_heads_ = 0, kv_heads_ = 0, head_dim_ = 0, hidden_ = 0;
  float eps_ = 1e-6f, theta_ = 1e6f;
};

// gate/up/down with the intermediate split over TP: SiluAndMul over [gate | up].
class DenseMlp {
 public:
  // `prefix` names the module ("model.layers.3.mlp", "...mlp.experts.5").
  static absl::StatusOr<DenseMlp> Load(const LoadContext& ctx, const std::string& prefix, int64_t intermediate);
  // This rank's [gate | up] rows [2·I/tp, H] and down columns [H, I/tp], read
  // on the host (Load places them).
  static absl::StatusOr<std::pair<Tensor, Tensor>> LoadHost(const LoadContext& ctx, const std::string& prefix,
                                                            int64_t intermediate);
  // x [N, H] → partial [N, H] (N may be 0).
  absl::StatusOr<Tensor> Forward(const Tensor& x) const;

 private:
  Tensor gate_up_;  // [2·I/tp, H]: this rank's gate rows, then its up rows
  Tensor down_;     // [H, I/tp]
};

// Router (replicated) + experts (each sharded over TP, stacked [E, ...]),
// routed and grouped by expert on the device, then run fused, grouped or one
// by one (ModelOptions::moe_experts; RoutedExperts: routed_experts.h).
class MoeBlock {
 public:
  static absl::StatusOr<MoeBlock> Load(const LoadContext& ctx, int64_t layer);
  // x [N, H] (every DP group's FFN rows) → partial [N, H].
  absl::StatusOr<Tensor> Forward(const Tensor& x) const;
  // The same experts with the finalize handed on: expert outputs [N, K, H]
  // (slot k of a row: its k-th routed expert by ascending id, the order
  // Forward adds them in) and their routing weights [N, K]. The handle's
  // unfused completion is Forward's finalize (bit for bit its output).
  absl::StatusOr<std::shared_ptr<const boundary::DeferredFinalize>> ForwardDeferred(const Tensor& x) const;
  // The most rows a batch may have to run grouped (0: never grouped).
  int64_t grouped_max_rows() const;

 private:
  // The routes' expert outputs by ascending expert id and their weights.
  absl::StatusOr<ExpertSlots> Run(const Tensor& x) const;

  Tensor router_;  // [E, H]
  RoutedExperts experts_;
  int64_t top_k_ = 0;
  bool norm_topk_prob_ = true;
};

struct DecoderLayer {
  int64_t global_layer = 0;
  boundary::NormParams attn_norm, ffn_norm;  // input_layernorm, post_attention_layernorm
  std::unique_ptr<Attention> attention;
  std::unique_ptr<DenseMlp> mlp;  // dense layers
  std::unique_ptr<MoeBlock> moe;  // sparse layers
  std::shared_ptr<boundary::StageBoundary> attn_boundary, ffn_boundary;
};

}  // namespace seam::models::internal
