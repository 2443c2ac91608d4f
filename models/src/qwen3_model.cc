// Qwen3Model: loading this rank's shards inside a layer stack (one attention
// and one FFN stage per decoder layer), and the forward of a pipeline piece:
// it enters through the embedding or a handoff, runs each layer between its
// boundaries and leaves through the final norm and lm_head or a handoff.
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

Qwen3Model::Qwen3Model(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Qwen3Model::~Qwen3Model() = default;
const weights::ModelConfig& Qwen3Model::config() const { return impl_->config; }
const ModelOptions& Qwen3Model::options() const { return impl_->options; }
const AttentionShard& Qwen3Model::attention_shard() const { return impl_->shard; }
int64_t Qwen3Model::layers() const { return static_cast<int64_t>(impl_->layers.size()); }
bool Qwen3Model::is_first_piece() const { return impl_->options.first_layer == 0; }
bool Qwen3Model::is_last_piece() const { return impl_->options.end_layer == impl_->config.num_hidden_layers; }

int64_t Qwen3Model::graph_max_rows() const {
  int64_t most = kUnboundedGraphRows;
  for (const auto& layer : impl_->layers) {
    if (layer->moe != nullptr) most = std::min(most, layer->moe->grouped_max_rows());
  }
  return most;
}

absl::StatusOr<std::unique_ptr<Qwen3Model>> Qwen3Model::Load(const weights::Checkpoint& checkpoint,
                                                             const ModelOptions& options) {
  auto impl = std::make_unique<Impl>();
  impl->config = checkpoint.config();
  impl->options = options;
  const weights::ModelConfig& c = impl->config;
  const boundary::Topology& topo = options.topology;
  const int total = static_cast<int>(c.num_hidden_layers);
  if (options.end_layer < 0) impl->options.end_layer = total;
  const int first = options.first_layer, end = impl->options.end_layer;
  if (first < 0 || first > end || end > total) {
    return absl::InvalidArgumentError(
        absl::StrCat("layer range [", first, ", ", end, ") is not inside the model's ", total, " layers"));
  }
  if (first > 0 && first == end) {
    return absl::InvalidArgumentError(absl::StrCat(
        "pipeline piece [", first, ", ", end, ") holds no layer; every piece after the first enters a layer"));
  }
  if (options.policy == boundary::ReductionPolicy::kAuto) {
    return absl::InvalidArgumentError("reduction policy must be resolved (ResolveReductionPolicy) before loading");
  }
  SEAM_ASSIGN_OR_RETURN(impl->shard, AttentionShard::Of(c, topo.attn_tp(), topo.attn_tp_rank()));
  const internal::LoadContext ctx{checkpoint,    c, topo, impl->shard, options.dtype, options.device,
                                  options.moe_experts};

  const bool first_piece = first == 0, last_piece = end == total;
  if (first_piece || (last_piece && c.tie_word_embeddings)) {
    SEAM_ASSIGN_OR_RETURN(impl->embed, ctx.Load("model.embed_tokens.weight", {c.vocab_size, c.hidden_size}));
  }
  if (last_piece) {
    if (c.tie_word_embeddings) {
      impl->lm_head = impl->embed;
      if (!first_piece) impl->embed = Tensor();  // the last piece of a split reads the table as lm_head only
    } else {
      SEAM_ASSIGN_OR_RETURN(impl->lm_head, ctx.Load("lm_head.weight", {c.vocab_size, c.hidden_size}));
    }
    impl->final_norm.eps = c.rms_norm_eps;
    SEAM_ASSIGN_OR_RETURN(impl->final_norm.weight, ctx.Load("model.norm.weight", {c.hidden_size}));
  }

  // One rank of the group reports; the others load the same layers alongside.
  Progress progress(absl::StrCat("loading weights of layers ", first, "..", end - 1, " (TP ", topo.tp, ")"),
                    end - first, ProgressUnit::kItems,
                    ProgressOptions{topo.tp_rank == 0 ? ProgressMode::kAuto : ProgressMode::kOff});
  const weights::ModelConfig config_copy = c;
  boundary::LayerStack stack(boundary::LayerStackOptions{
      topo, options.policy, [config_copy](int layer) { return StagesOf(config_copy, layer); }, first, end, total});
  // The last layer's MoE hands its finalize to the final norm: its stages take
  // a provider that accepts the handoff at the terminal MoE exit.
  const bool defer_last = options.defer_moe_finalize && last_piece && c.IsSparseLayer(total - 1);
  if (defer_last) impl->finalize_norm = boundary::MakeFinalizeNormService(options.fusions);
  for (int l = first; l < end; ++l) {
    absl::StatusOr<std::unique_ptr<DecoderLayer>> loaded = LoadLayer(ctx, l);
    if (!loaded.ok()) progress.Fail();
    SEAM_RETURN_IF_ERROR(loaded.status());
    std::unique_ptr<DecoderLayer> layer = std::move(*loaded);
    progress.Advance(1, absl::StrCat("layer ", l, " from ", checkpoint.ShardOf(internal::LayerName(l, "input_layernorm.weight"))));
    const std::vector<boundary::StageDeclaration> stages = StagesOf(c, l);
    const boundary::StageOptions with{defer_last && l == total - 1
                                          ? boundary::TerminalFinalizeProvider(options.fusions)
                                          : options.fusions};
    SEAM_ASSIGN_OR_RETURN(auto boundaries,
                          SEAM_APPEND_STAGES(l, boundary::StageItem{stages[0], &layer->attn_norm, with},
                                             boundary::StageItem{stages[1], &layer->ffn_norm, with}));
    layer->attn_boundary = boundaries[0];
    layer->ffn_boundary = boundaries[1];
    impl->layers.push_back(std::move(layer));
  }
  SEAM_RETURN_IF_ERROR(stack.Close());
  return std::unique_ptr<Qwen3Model>(new Qwen3Model(std::move(impl)));
}

absl::StatusOr<std::unique_ptr<KvCache>> Qwen3Model::MakeCache(KvCacheOptions options) const {
  options.device = impl_->options.device;
  return KvCache::Create(std::max<int64_t>(1, layers()), impl_->shard.kv_heads, impl_->config.head_dim, options);
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

absl::StatusOr<Tensor> Qwen3Model::ForwardPiece(boundary::ForwardBatch& batch, const StepInput& input,
                                                KvCache& cache, const boundary::PipelineTensors* in,
                                                boundary::PipelineTensors* out) {
  const Impl& m = *impl_;
  SEAM_RETURN_IF_ERROR(internal::CheckPieceArgs(is_first_piece(), is_last_piece(), in, out));
  SEAM_ASSIGN_OR_RETURN(internal::DeviceStep step, internal::PrepareStep(m.config, m.options, is_first_piece(),
                                                                         is_last_piece(), batch, input, in));
  const bool cp = batch.variant == boundary::BatchVariant::kContextParallel;
  if (cp) {  // a context-parallel batch splits each sequence over the CP ranks
    std::vector<int64_t> rows;
    for (const SequenceStep& s : input.sequences) rows.push_back(static_cast<int64_t>(s.tokens.size()));
    SEAM_RETURN_IF_ERROR(batch.SetSequenceRows(std::move(rows)));
  }
  SEAM_ASSIGN_OR_RETURN(boundary::Hidden h, m.Enter(batch, step.ids, in));
  SEAM_RETURN_IF_ERROR(internal::ReserveStep(cache, &step));
  internal::CpAttention cp_attention;
  if (cp) {
    SEAM_ASSIGN_OR_RETURN(cp_attention, internal::BuildCpAttention(cache, step.spans, batch, m.options.device));
  }
  return m.Run(std::move(h), batch, step.cache, cache, step.last_rows, out, cp ? &cp_attention : nullptr);
}

absl::StatusOr<Tensor> Qwen3Model::ForwardPieceStep(boundary::ForwardBatch& batch, const Tensor& ids,
                                                    const boundary::PipelineTensors* in, const CacheBatch& step,
                                                    KvCache& cache, const Tensor& last_rows,
                                                    boundary::PipelineTensors* out) {
  const bool first = is_first_piece();
  SEAM_RETURN_IF_ERROR(internal::CheckPieceArgs(first, is_last_piece(), in, out));
  if (batch.variant == boundary::BatchVariant::kContextParallel) {
    return absl::FailedPreconditionError("a context-parallel batch needs its sequences: run it through ForwardPiece");
  }
  if (first && (ids.rank() != 1 || ids.dim(0) != batch.rows.my_dp_rows())) {
    return absl::InvalidArgumentError(absl::StrCat("ids: expected [", batch.rows.my_dp_rows(), "], got ",
                                                   ShapeToString(ids.shape())));
  }
  SEAM_ASSIGN_OR_RETURN(boundary::Hidden h, impl_->Enter(batch, ids, in));
  return impl_->Run(std::move(h), batch, step, cache, last_rows, out);
}

absl::StatusOr<boundary::Hidden> Qwen3Model::Impl::Enter(boundary::ForwardBatch& batch, const Tensor& ids,
                                                         const boundary::PipelineTensors* in) const {
  if (in != nullptr) return boundary::FromPp(*in, batch, *layers.front()->attn_boundary);
  // An input-scattered batch embeds only this rank's slice of the tokens.
  const auto [first, count] = boundary::StackInputRows(batch);
  const Tensor mine = ids.Rows(first, count);
  Tensor x = Tensor::Empty({count, config.hidden_size}, options.dtype, options.device);
  SEAM_RETURN_IF_ERROR(kernels::Embedding(mine, embed, 0, x));
  return boundary::Start(batch, x);
}

absl::StatusOr<Tensor> Qwen3Model::Impl::Run(boundary::Hidden h, boundary::ForwardBatch& batch,
                                             const CacheBatch& step, KvCache& cache, const Tensor& last_rows,
                                             boundary::PipelineTensors* out,
                                             const internal::CpAttention* cp) const {
  const weights::ModelConfig& c = config;
  for (size_t l = 0; l < layers.size(); ++l) {
    SEAM_ASSIGN_OR_RETURN(h, RunLayer(*layers[l], static_cast<int64_t>(l), h, batch, step, cache, cp));
  }
  if (options.end_layer != c.num_hidden_layers) {
    SEAM_ASSIGN_OR_RETURN(*out, boundary::ToPp(h, batch));
    if (out->hidden.defined() && !out->hidden.is_contiguous()) out->hidden = out->hidden.Clone();
    if (out->residual.defined() && !out->residual.is_contiguous()) out->residual = out->residual.Clone();
    return Tensor();
  }
  boundary::FinalNormOptions final_options;
  final_options.finalize_norm = finalize_norm.get();  // a finalize handoff runs fused
  SEAM_ASSIGN_OR_RETURN(Tensor normed, boundary::FinalNorm(h, batch, final_norm, final_options));
  return Logits(normed, last_rows);
}

absl::StatusOr<Tensor> Qwen3Model::Impl::Logits(const Tensor& normed, const Tensor& last_rows) const {
  const weights::ModelConfig& c = config;
  // Every rank of a DP group holds the same normed rows: one computes the logits.
  if (options.topology.attn_tp_rank() != 0 || options.topology.cp_rank() != 0) return Tensor();
  Tensor chosen = normed;
  if (last_rows.defined()) {
    chosen = Tensor::Empty({last_rows.dim(0), c.hidden_size}, normed.dtype(), normed.device());
    SEAM_RETURN_IF_ERROR(kernels::GatherRows(normed, last_rows, chosen));
  }
  Tensor logits = Tensor::Empty({chosen.rows(), c.vocab_size}, DType::kF32, options.device);
  SEAM_RETURN_IF_ERROR(kernels::Matmul(chosen, lm_head, logits));
  return logits;
}

}  // namespace seam::models
