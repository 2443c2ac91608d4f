// Qwen3Model: loading this rank's shards inside a layer stack (one attention
// and one FFN stage per decoder layer), and its layers' forward, each
// between its boundaries; entering and leaving the stack are DecoderModel's.
#include "seam/models/qwen3_model.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "seam/boundary/layer_stack.h"
#include "seam/boundary/stream_ops.h"
#include "seam/core/progress.h"
#include "seam/core/status.h"
#include "seam/kernels/ops.h"
#include "src/qwen3_layers.h"
#include "src/qwen3_model_impl.h"
#include "src/step_inputs.h"

namespace seam::models {

using internal::DecoderLayer;

namespace {

std::vector<boundary::StageDeclaration> StagesOf(const weights::ModelConfig& config, int layer) {
  boundary::FfnDeclOptions ffn;
  ffn.sparse = config.IsSparseLayer(layer);
  return {boundary::DeclareAttn(), boundary::DeclareFfn(ffn)};
}

absl::StatusOr<std::unique_ptr<DecoderLayer>> LoadLayer(const internal::LoadContext& ctx, int layer) {
  const weights::ModelConfig& c = ctx.config;
  auto out = std::make_unique<DecoderLayer>();
  out->global_layer = layer;
  out->attn_norm.eps = out->ffn_norm.eps = c.rms_norm_eps;
  SEAM_ASSIGN_OR_RETURN(out->attn_norm.weight,
                        ctx.Load(internal::LayerName(layer, "input_layernorm.weight"), {c.hidden_size}));
  SEAM_ASSIGN_OR_RETURN(out->ffn_norm.weight,
                        ctx.Load(internal::LayerName(layer, "post_attention_layernorm.weight"), {c.hidden_size}));
  SEAM_ASSIGN_OR_RETURN(internal::Attention attention, internal::Attention::Load(ctx, layer));
  out->attention = std::make_unique<internal::Attention>(std::move(attention));
  if (c.IsSparseLayer(layer)) {
    SEAM_ASSIGN_OR_RETURN(internal::MoeBlock moe, internal::MoeBlock::Load(ctx, layer));
    out->moe = std::make_unique<internal::MoeBlock>(std::move(moe));
  } else {
    SEAM_ASSIGN_OR_RETURN(internal::DenseMlp mlp,
                          internal::DenseMlp::Load(ctx, internal::LayerName(layer, "mlp"), c.intermediate_size));
    out->mlp = std::make_unique<internal::DenseMlp>(std::move(mlp));
  }
  return out;
}

}  // namespace

Qwen3Model::Qwen3Model(const weights::ModelConfig& config, const ModelOptions& options)
    : DecoderModel(config, options), impl_(std::make_unique<Impl>()) {}
Qwen3Model::~Qwen3Model() = default;
const AttentionShard& Qwen3Model::attention_shard() const { return impl_->shard; }
int64_t Qwen3Model::layers() const { return static_cast<int64_t>(impl_->layers.size()); }

int64_t Qwen3Model::graph_max_rows() const {
  int64_t most = kUnboundedGraphRows;
  for (const auto& layer : impl_->layers) {
    if (layer->moe != nullptr) most = std::min(most, layer->moe->grouped_max_rows());
  }
  return most;
}

absl::StatusOr<std::unique_ptr<Qwen3Model>> Qwen3Model::Load(const weights::Checkpoint& checkpoint,
                                                             const ModelOptions& options) {
  SEAM_ASSIGN_OR_RETURN(const ModelOptions checked, CheckedOptions(checkpoint.config(), options));
  std::unique_ptr<Qwen3Model> model(new Qwen3Model(checkpoint.config(), checked));
  SEAM_RETURN_IF_ERROR(model->LoadLayers(checkpoint));
  return model;
}

absl::Status Qwen3Model::LoadLayers(const weights::Checkpoint& checkpoint) {
  const weights::ModelConfig& c = config();
  const ModelOptions& o = options();
  const boundary::Topology& topo = o.topology;
  const int first = o.first_layer, end = o.end_layer, total = static_cast<int>(c.num_hidden_layers);
  SEAM_ASSIGN_OR_RETURN(impl_->shard, AttentionShard::Of(c, topo.attn_tp(), topo.attn_tp_rank()));
  const internal::LoadContext ctx{checkpoint, c, impl_->shard, o};
  SEAM_RETURN_IF_ERROR(LoadEnds(ctx, "model.embed_tokens.weight", "model.norm.weight"));
  // One rank of the group reports; the others load the same layers alongside.
  Progress progress(absl::StrCat("loading weights of layers ", first, "..", end - 1, " (TP ", topo.tp, ")"),
                    end - first, ProgressUnit::kItems,
                    ProgressOptions{topo.tp_rank == 0 ? ProgressMode::kAuto : ProgressMode::kOff});
  const weights::ModelConfig config_copy = c;
  boundary::LayerStack stack(boundary::LayerStackOptions{
      topo, o.policy, [config_copy](int layer) { return StagesOf(config_copy, layer); }, first, end, total});
  // The last layer's MoE hands its finalize to the final norm: its stages take
  // a provider that accepts the handoff at the terminal MoE exit.
  const bool defer_last = o.defer_moe_finalize && is_last_piece() && c.IsSparseLayer(total - 1);
  if (defer_last) ends_.finalize_norm = boundary::MakeFinalizeNormService(o.fusions);
  for (int l = first; l < end; ++l) {
    absl::StatusOr<std::unique_ptr<DecoderLayer>> loaded = LoadLayer(ctx, l);
    if (!loaded.ok()) progress.Fail();
    SEAM_RETURN_IF_ERROR(loaded.status());
    std::unique_ptr<DecoderLayer> layer = std::move(*loaded);
    progress.Advance(1, absl::StrCat("layer ", l, " from ", checkpoint.ShardOf(internal::LayerName(l, "input_layernorm.weight"))));
    const std::vector<boundary::StageDeclaration> stages = StagesOf(c, l);
    const boundary::StageOptions with{defer_last && l == total - 1 ? boundary::TerminalFinalizeProvider(o.fusions)
                                                                   : o.fusions};
    SEAM_ASSIGN_OR_RETURN(auto boundaries,
                          SEAM_APPEND_STAGES(l, boundary::StageItem{stages[0], &layer->attn_norm, with},
                                             boundary::StageItem{stages[1], &layer->ffn_norm, with}));
    layer->attn_boundary = boundaries[0];
    layer->ffn_boundary = boundaries[1];
    impl_->layers.push_back(std::move(layer));
  }
  return stack.Close();
}

const boundary::StageBoundary* Qwen3Model::entry_boundary() const {
  return impl_->layers.empty() ? nullptr : impl_->layers.front()->attn_boundary.get();
}

absl::StatusOr<std::unique_ptr<KvCache>> Qwen3Model::MakeCache(KvCacheOptions options) const {
  options.device = this->options().device;
  return KvCache::Create(std::max<int64_t>(1, layers()), impl_->shard.kv_heads, config().head_dim, options);
}

absl::StatusOr<boundary::Hidden> Qwen3Model::Impl::RunLayer(const DecoderLayer& layer, int64_t cache_layer,
                                                            boundary::Hidden h, boundary::ForwardBatch& batch,
                                                            const CacheBatch& step, KvCache& cache,
                                                            const internal::CpAttention* cp) const {
  SEAM_ASSIGN_OR_RETURN(Tensor x, layer.attn_boundary->Prepare(h, batch));
  Tensor attn_out = x;  // no rows: hand the prepared tensor on
  if (cp != nullptr) {  // every CP rank joins the context gather, rows or none
    SEAM_ASSIGN_OR_RETURN(attn_out, layer.attention->ForwardContextParallel(x, step, cache, cache_layer, batch, *cp));
  } else if (x.rows() != 0) {
    SEAM_ASSIGN_OR_RETURN(attn_out, layer.attention->Forward(x, step, cache, cache_layer));
  }
  SEAM_ASSIGN_OR_RETURN(h, layer.attn_boundary->Finish(attn_out, batch));
  SEAM_ASSIGN_OR_RETURN(x, layer.ffn_boundary->Prepare(h, batch));
  // With fusions the FFN's exit is chosen before its compute (boundary contract).
  std::unique_ptr<boundary::ExitScope> exit;
  if (layer.ffn_boundary->has_fusions()) {
    SEAM_ASSIGN_OR_RETURN(exit, layer.ffn_boundary->Exit(batch));
  }
  Tensor ffn_out;
  if (exit != nullptr && exit->defer_moe_finalize() && layer.moe != nullptr) {
    SEAM_ASSIGN_OR_RETURN(auto handoff, layer.moe->ForwardDeferred(x));
    return exit->FinishDeferred(std::move(handoff));
  }
  if (layer.moe != nullptr) {
    SEAM_ASSIGN_OR_RETURN(ffn_out, layer.moe->Forward(x));
  } else {
    SEAM_ASSIGN_OR_RETURN(ffn_out, layer.mlp->Forward(x));
  }
  if (exit != nullptr) return exit->Finish(ffn_out);
  return layer.ffn_boundary->Finish(ffn_out, batch);
}

absl::StatusOr<boundary::Hidden> Qwen3Model::RunLayers(boundary::Hidden h, boundary::ForwardBatch& batch,
                                                       const CacheBatch& step, KvCache& cache,
                                                       const internal::CpAttention* cp) const {
  for (size_t l = 0; l < impl_->layers.size(); ++l) {
    SEAM_ASSIGN_OR_RETURN(h, impl_->RunLayer(*impl_->layers[l], static_cast<int64_t>(l), h, batch, step, cache, cp));
  }
  return h;
}

}  // namespace seam::models
