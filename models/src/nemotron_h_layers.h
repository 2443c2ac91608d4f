// The mixers and MLP of Nemotron-H on one rank, each loading only this
// rank's shards and returning an unreduced partial output: the Mamba2 mixer
// (heads and groups split over attention TP), attention without a rotary
// embedding (heads over attention TP), and the squared-ReLU MLP
// (intermediate over TP). Private to the models library.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "seam/boundary/residual_ops.h"
#include "seam/boundary/stage_boundary.h"
#include "seam/core/tensor.h"
#include "seam/models/kv_cache.h"
#include "src/load_context.h"

namespace seam::models::internal {

// Where a Nemotron-H checkpoint's tensors are: "backbone." (published
// checkpoints, transformers 4) or "model." (saved by transformers 5).
struct NemotronHNames {
  std::string prefix;
  std::string embedding;  // "<prefix>embeddings.weight" or the older "<prefix>embedding.weight"
  static NemotronHNames Of(const weights::Checkpoint& checkpoint);
  std::string Layer(int64_t layer, const std::string& suffix) const;  // "<prefix>layers.<l>.<suffix>"
};

// Mamba2: in_proj to gate z, the conv channels (x, B, C) and dt; the causal
// conv1d with SiLU; the selective scan; the gated grouped RMSNorm with z;
// out_proj. This rank holds heads [r·H/atp, (r+1)·H/atp) and their groups.
class MambaMixer {
 public:
  static absl::StatusOr<MambaMixer> Load(const LoadContext& ctx, const NemotronHNames& names, int64_t layer);
  // x: this DP group's rows [T, H] (T > 0), the step's sequences in order.
  // Continues each sequence's state in layer `state_layer` of the cache.
  absl::StatusOr<Tensor> Forward(const Tensor& x, const CacheBatch& step, KvCache& cache, int64_t state_layer) const;
  MambaStateShape StateShape(int64_t layers) const;

 private:
  Tensor w_z_, w_xbc_, w_dt_;  // [I/atp, H], [(I + 2GN)/atp, H], [Hm/atp, H]
  Tensor conv_w_, conv_b_;     // [(I + 2GN)/atp, K], [(I + 2GN)/atp] (undefined without bias)
  Tensor dt_bias_, a_, d_;     // f32 [Hm/atp]; a = -exp(A_log)
  Tensor norm_, w_out_;        // [I/atp]; [H, I/atp]
  kernels::ScanAlgorithm scan_ = kernels::ScanAlgorithm::kAuto;
  int64_t heads_ = 0, head_dim_ = 0, groups_ = 0, state_ = 0, kernel_ = 0, hidden_ = 0;
  float eps_ = 1e-5f, dt_min_ = 0.0f, dt_max_ = 0.0f;
};

// GQA attention over the paged KV cache without rotary embedding or q/k norms.
class PlainAttention {
 public:
  static absl::StatusOr<PlainAttention> Load(const LoadContext& ctx, const NemotronHNames& names, int64_t layer);
  absl::StatusOr<Tensor> Forward(const Tensor& x, const CacheBatch& step, KvCache& cache, int64_t cache_layer) const;

 private:
  Tensor wq_, wk_, wv_, wo_;
  int64_t q_heads_ = 0, kv_heads_ = 0, head_dim_ = 0, hidden_ = 0;
};

// down(relu(up(x))²), the intermediate split over TP.
class Relu2Mlp {
 public:
  static absl::StatusOr<Relu2Mlp> Load(const LoadContext& ctx, const NemotronHNames& names, int64_t layer);
  absl::StatusOr<Tensor> Forward(const Tensor& x) const;  // x [N, H] (N may be 0) → partial [N, H]

 private:
  Tensor up_, down_;  // [I/tp, H], [H, I/tp]
};

// One pattern character: its pre-norm, its mixer or MLP, and its boundary.
struct NemotronHBlock {
  int64_t global_layer = 0;
  weights::HybridLayer kind = weights::HybridLayer::kMlp;
  int64_t cache_index = 0;  // KV layer (attention) or state layer (Mamba) on this rank
  boundary::NormParams norm;
  std::unique_ptr<MambaMixer> mamba;
  std::unique_ptr<PlainAttention> attention;
  std::unique_ptr<Relu2Mlp> mlp;
  std::shared_ptr<boundary::StageBoundary> boundary;
};

}  // namespace seam::models::internal
