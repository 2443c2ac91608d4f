// LongcatFlashModel: loading this rank's shards inside a layer stack (per
// logical layer: attention and the MoE on the main stack, the dense MLP →
// attention → dense MLP branch prepared from the MoE's input), and its
// layers' forward between their boundaries; entering and leaving the stack
// (embedding or handoff, final norm and lm_head or handoff) are DecoderModel's.
#include "seam/models/longcat_flash_model.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "seam/boundary/branch.h"
#include "seam/boundary/layer_stack.h"
#include "seam/boundary/stream_ops.h"
#include "seam/core/status.h"
#include "src/longcat_layers.h"
#include "src/step_inputs.h"

namespace seam::models {

using internal::LongcatLayer;

struct LongcatFlashModel::Impl {
  std::vector<std::unique_ptr<LongcatLayer>> layers;
  absl::StatusOr<boundary::Hidden> RunLayer(const LongcatLayer& layer, int64_t index, boundary::Hidden h,
                                            boundary::ForwardBatch& batch, const CacheBatch& step,
                                            KvCache& cache) const;
};

namespace {

// The main stack's stages of a layer: the first attention, then the MoE,
// which merges the branch its input prepares.
std::vector<boundary::StageDeclaration> MainStages() {
  boundary::FfnDeclOptions moe;
  moe.sparse = true;
  moe.merges_branch = true;
  return {boundary::DeclareAttn(), boundary::DeclareFfn(moe)};
}

std::string LayerPrefix(int64_t layer) { return absl::StrCat("model.layers.", layer, "."); }

absl::StatusOr<std::unique_ptr<LongcatLayer>> LoadLayer(const internal::LoadContext& ctx, int layer) {
  const weights::ModelConfig& c = ctx.config;
  const std::string p = LayerPrefix(layer);
  auto out = std::make_unique<LongcatLayer>();
  out->global_layer = layer;
  for (int i = 0; i < 2; ++i) {
    out->attn_norm[i].eps = out->mlp_norm[i].eps = c.rms_norm_eps;
    SEAM_ASSIGN_OR_RETURN(out->attn_norm[i].weight,
                          ctx.Load(absl::StrCat(p, "input_layernorm.", i, ".weight"), {c.hidden_size}));
    SEAM_ASSIGN_OR_RETURN(out->mlp_norm[i].weight,
                          ctx.Load(absl::StrCat(p, "post_attention_layernorm.", i, ".weight"), {c.hidden_size}));
    SEAM_ASSIGN_OR_RETURN(internal::MlaAttention attn,
                          internal::MlaAttention::Load(ctx, absl::StrCat(p, "self_attn.", i, ".")));
    out->attn[i] = std::make_unique<internal::MlaAttention>(std::move(attn));
    SEAM_ASSIGN_OR_RETURN(internal::DenseMlp mlp,
                          internal::DenseMlp::Load(ctx, absl::StrCat(p, "mlps.", i), c.intermediate_size));
    out->mlp[i] = std::make_unique<internal::DenseMlp>(std::move(mlp));
  }
  SEAM_ASSIGN_OR_RETURN(internal::LongcatMoe moe, internal::LongcatMoe::Load(ctx, p + "mlp."));
  out->moe = std::make_unique<internal::LongcatMoe>(std::move(moe));
  return out;
}

}  // namespace

LongcatFlashModel::LongcatFlashModel(const weights::ModelConfig& config, const ModelOptions& options)
    : DecoderModel(config, options), impl_(std::make_unique<Impl>()) {}
LongcatFlashModel::~LongcatFlashModel() = default;
int64_t LongcatFlashModel::layers() const { return static_cast<int64_t>(impl_->layers.size()); }

int64_t LongcatFlashModel::graph_max_rows() const {
  int64_t most = kUnboundedGraphRows;
  for (const auto& layer : impl_->layers) most = std::min(most, layer->moe->grouped_max_rows());
  return most;
}

absl::StatusOr<std::unique_ptr<LongcatFlashModel>> LongcatFlashModel::Load(const weights::Checkpoint& checkpoint,
                                                                           const ModelOptions& options) {
  const weights::ModelConfig& c = checkpoint.config();
  if (!c.is_longcat_flash()) {
    return absl::InvalidArgumentError(absl::StrCat("LongcatFlashModel loads longcat_flash checkpoints, not ",
                                                   c.architecture));
  }
  if (options.topology.attn_cp > 1) {
    return absl::InvalidArgumentError(absl::StrCat("LongCat-Flash's branches serve ordinary token rows only: ",
                                                   "context parallelism (attn_cp ", options.topology.attn_cp,
                                                   ") is not supported"));
  }
  SEAM_ASSIGN_OR_RETURN(const ModelOptions checked, CheckedOptions(c, options));
  SEAM_RETURN_IF_ERROR(weights::ValidateParallel(c, options.topology.tp, options.topology.attn_dp));
  std::unique_ptr<LongcatFlashModel> model(new LongcatFlashModel(c, checked));
  SEAM_RETURN_IF_ERROR(model->LoadLayers(checkpoint));
  return model;
}

absl::Status LongcatFlashModel::LoadLayers(const weights::Checkpoint& checkpoint) {
  const weights::ModelConfig& c = config();
  const ModelOptions& o = options();
  const boundary::Topology& topo = o.topology;
  const int64_t heads = c.num_attention_heads / topo.attn_tp();
  const internal::LoadContext ctx{checkpoint, c, AttentionShard{heads, 1, 0, 1}, o};
  SEAM_RETURN_IF_ERROR(LoadEnds(ctx, "model.embed_tokens.weight", "model.norm.weight"));
  boundary::LayerStack stack(boundary::LayerStackOptions{
      topo, o.policy, [](int) { return MainStages(); }, o.first_layer, o.end_layer,
      static_cast<int>(c.num_hidden_layers)});
  const std::vector<boundary::StageDeclaration> main = MainStages();
  for (int l = o.first_layer; l < o.end_layer; ++l) {
    SEAM_ASSIGN_OR_RETURN(std::unique_ptr<LongcatLayer> layer, LoadLayer(ctx, l));
    SEAM_ASSIGN_OR_RETURN(auto boundaries, SEAM_APPEND_STAGES(l, boundary::StageItem{main[0], &layer->attn_norm[0]},
                                                              boundary::StageItem{main[1], &layer->mlp_norm[0]}));
    layer->attn_boundary = boundaries[0];
    layer->moe_boundary = boundaries[1];
    // The branch's first stage reads the MoE's prepared input: its norm
    // (post_attention_layernorm.0, the MoE's) is never applied again.
    SEAM_ASSIGN_OR_RETURN(layer->branch,
                          SEAM_APPEND_BRANCH(l, *layer->moe_boundary,
                                             boundary::StageItem{boundary::DeclareFfn(), &layer->mlp_norm[0]},
                                             boundary::StageItem{boundary::DeclareAttn(), &layer->attn_norm[1]},
                                             boundary::StageItem{boundary::DeclareFfn(), &layer->mlp_norm[1]}));
    impl_->layers.push_back(std::move(layer));
  }
  return stack.Close();
}

const boundary::StageBoundary* LongcatFlashModel::entry_boundary() const {
  return impl_->layers.empty() ? nullptr : impl_->layers.front()->attn_boundary.get();
}

absl::StatusOr<std::unique_ptr<KvCache>> LongcatFlashModel::MakeCache(KvCacheOptions options) const {
  options.device = this->options().device;
  const weights::ModelConfig& c = config();
  return KvCache::CreateLatent(std::max<int64_t>(1, 2 * layers()), c.kv_lora_rank + c.qk_rope_head_dim, options);
}

absl::StatusOr<boundary::Hidden> LongcatFlashModel::Impl::RunLayer(const LongcatLayer& layer, int64_t index,
                                                                   boundary::Hidden h,
                                                                   boundary::ForwardBatch& batch,
                                                                   const CacheBatch& step, KvCache& cache) const {
  // Main stack: the first attention.
  SEAM_ASSIGN_OR_RETURN(Tensor x, layer.attn_boundary->Prepare(h, batch));
  Tensor out = x;  // no rows: hand the prepared tensor on
  if (x.rows() != 0) {
    SEAM_ASSIGN_OR_RETURN(out, layer.attn[0]->Forward(x, step, cache, 2 * index));
  }
  SEAM_ASSIGN_OR_RETURN(h, layer.attn_boundary->Finish(out, batch));
  // The MoE's input, prepared once: the MoE and the branch both read it.
  SEAM_ASSIGN_OR_RETURN(Tensor moe_in, layer.moe_boundary->Prepare(h, batch));
  SEAM_ASSIGN_OR_RETURN(Tensor moe_out, layer.moe->Forward(moe_in, *layer.moe_boundary, batch));
  // The branch: dense MLP, the second attention, dense MLP.
  SEAM_ASSIGN_OR_RETURN(boundary::BranchFork fork, boundary::BranchInput(*layer.branch[0], moe_in, batch));
  SEAM_ASSIGN_OR_RETURN(out, layer.mlp[0]->Forward(fork.input));
  SEAM_ASSIGN_OR_RETURN(boundary::Hidden bh, layer.branch[0]->Finish(out, fork.batch));
  SEAM_ASSIGN_OR_RETURN(x, layer.branch[1]->Prepare(bh, fork.batch));
  out = x;
  if (x.rows() != 0) {
    SEAM_ASSIGN_OR_RETURN(out, layer.attn[1]->Forward(x, step, cache, 2 * index + 1));
  }
  SEAM_ASSIGN_OR_RETURN(bh, layer.branch[1]->Finish(out, fork.batch));
  SEAM_ASSIGN_OR_RETURN(x, layer.branch[2]->Prepare(bh, fork.batch));
  SEAM_ASSIGN_OR_RETURN(out, layer.mlp[1]->Forward(x));
  SEAM_ASSIGN_OR_RETURN(bh, layer.branch[2]->Finish(out, fork.batch));
  SEAM_ASSIGN_OR_RETURN(boundary::BranchResult branch, boundary::BranchOutput(bh, fork.batch));
  // The MoE's sum, then the branch's residual and output merged into it.
  SEAM_ASSIGN_OR_RETURN(h, layer.moe_boundary->Finish(moe_out, batch));
  return boundary::MergeBranch(h, batch, branch);
}

absl::StatusOr<boundary::Hidden> LongcatFlashModel::RunLayers(boundary::Hidden h, boundary::ForwardBatch& batch,
                                                              const CacheBatch& step, KvCache& cache,
                                                              const internal::CpAttention*) const {
  for (size_t l = 0; l < impl_->layers.size(); ++l) {
    SEAM_ASSIGN_OR_RETURN(h, impl_->RunLayer(*impl_->layers[l], static_cast<int64_t>(l), h, batch, step, cache));
  }
  return h;
}

}  // namespace seam::models
