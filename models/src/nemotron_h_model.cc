// NemotronHModel: loading this rank's shards inside a layer stack (one stage
// per pattern character) and the forward of a pipeline piece: in through the
// embedding or a handoff, each block between its boundary's Prepare and
// Finish, out through the final norm and lm_head or a handoff.
#include "seam/models/nemotron_h_model.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "seam/boundary/layer_stack.h"
#include "seam/boundary/stream_ops.h"
#include "seam/core/status.h"
#include "seam/kernels/ops.h"
#include "src/nemotron_h_layers.h"
#include "src/step_inputs.h"

namespace seam::models {

using internal::NemotronHBlock;
using weights::HybridLayer;

struct NemotronHModel::Impl {
  weights::ModelConfig config;
  ModelOptions options;
  AttentionShard shard;
  Tensor embed, lm_head;  // [V, H]; lm_head is the embedding table when tied
  boundary::NormParams final_norm;
  std::vector<std::unique_ptr<NemotronHBlock>> blocks;
  int64_t attention_layers = 0, mamba_layers = 0;

  absl::StatusOr<boundary::Hidden> RunBlock(const NemotronHBlock& block, boundary::Hidden h,
                                            boundary::ForwardBatch& batch, const CacheBatch& step,
                                            KvCache& cache) const;
  absl::StatusOr<boundary::Hidden> Enter(boundary::ForwardBatch& batch, const Tensor& ids,
                                         const boundary::PipelineTensors* in) const;
  absl::StatusOr<Tensor> Run(boundary::Hidden h, boundary::ForwardBatch& batch, const CacheBatch& step,
                             KvCache& cache, const Tensor& last_rows, boundary::PipelineTensors* out) const;
};

namespace {

// Mixers (Mamba and attention) are exit-scoped and leave the gather of a
// scattered input to their compute; MLPs are dense FFNs.
boundary::StageDeclaration DeclarationOf(HybridLayer kind) {
  if (kind == HybridLayer::kMlp) return boundary::DeclareFfn();
  return boundary::DeclareAttn({boundary::ProducerReduction::kExitScoped, /*gathers_attn_tp_input=*/false});
}

absl::StatusOr<std::unique_ptr<NemotronHBlock>> LoadBlock(const internal::LoadContext& ctx,
                                                          const internal::NemotronHNames& names, int layer) {
  auto block = std::make_unique<NemotronHBlock>();
  block->global_layer = layer;
  block->kind = ctx.config.LayerKind(layer);
  block->norm.eps = ctx.config.rms_norm_eps;
  SEAM_ASSIGN_OR_RETURN(block->norm.weight, ctx.Load(names.Layer(layer, "norm.weight"), {ctx.config.hidden_size}));
  switch (block->kind) {
    case HybridLayer::kMamba: {
      SEAM_ASSIGN_OR_RETURN(internal::MambaMixer m, internal::MambaMixer::Load(ctx, names, layer));
      block->mamba = std::make_unique<internal::MambaMixer>(std::move(m));
      break;
    }
    case HybridLayer::kAttention: {
      SEAM_ASSIGN_OR_RETURN(internal::PlainAttention a, internal::PlainAttention::Load(ctx, names, layer));
      block->attention = std::make_unique<internal::PlainAttention>(std::move(a));
      break;
    }
    case HybridLayer::kMlp: {
      SEAM_ASSIGN_OR_RETURN(internal::Relu2Mlp m, internal::Relu2Mlp::Load(ctx, names, layer));
      block->mlp = std::make_unique<internal::Relu2Mlp>(std::move(m));
      break;
    }
  }
  return block;
}

}  // namespace

NemotronHModel::NemotronHModel(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
NemotronHModel::~NemotronHModel() = default;
const weights::ModelConfig& NemotronHModel::config() const { return impl_->config; }
const ModelOptions& NemotronHModel::options() const { return impl_->options; }
int64_t NemotronHModel::layers() const { return static_cast<int64_t>(impl_->blocks.size()); }
bool NemotronHModel::is_first_piece() const { return impl_->options.first_layer == 0; }
bool NemotronHModel::is_last_piece() const { return impl_->options.end_layer == impl_->config.num_hidden_layers; }

absl::StatusOr<std::unique_ptr<NemotronHModel>> NemotronHModel::Load(const weights::Checkpoint& checkpoint,
                                                                     const ModelOptions& options) {
  auto impl = std::make_unique<Impl>();
  impl->config = checkpoint.config();
  impl->options = options;
  const weights::ModelConfig& c = impl->config;
  const boundary::Topology& topo = options.topology;
  if (topo.attn_cp > 1) {
    // A Mamba layer's recurrence runs token after token through one
    // sequence's state: its tokens cannot be split over CP ranks.
    return absl::InvalidArgumentError(absl::StrCat("Nemotron-H's Mamba layers cannot use context parallelism (attn_cp ",
                                                   topo.attn_cp, "); run it with attn_cp 1"));
  }
  const int total = static_cast<int>(c.num_hidden_layers);
  if (options.end_layer < 0) impl->options.end_layer = total;
  const int first = options.first_layer, end = impl->options.end_layer;
  if (first < 0 || first >= end || end > total) {
    return absl::InvalidArgumentError(absl::StrCat("layer range [", first, ", ", end,
                                                   ") is not a non-empty range inside the model's ", total,
                                                   " layers"));
  }
  if (options.policy == boundary::ReductionPolicy::kAuto) {
    return absl::InvalidArgumentError("reduction policy must be resolved (ResolveReductionPolicy) before loading");
  }
  if (c.residual_in_fp32 && options.dtype != DType::kF32) {
    return absl::UnimplementedError("residual_in_fp32 with a compute dtype other than f32 is not supported");
  }
  SEAM_RETURN_IF_ERROR(weights::ValidateParallel(c, topo.tp, topo.attn_dp));
  impl->shard = AttentionShard{1, 1, 0, 1};
  if (c.hybrid_override_pattern.find('*') != std::string::npos) {
    SEAM_ASSIGN_OR_RETURN(impl->shard, AttentionShard::Of(c, topo.attn_tp(), topo.attn_tp_rank()));
  }
  const internal::LoadContext ctx{checkpoint, c, topo, impl->shard, options.dtype, options.device,
                                  MoeExperts::kAuto, options.mamba_scan};
  const internal::NemotronHNames names = internal::NemotronHNames::Of(checkpoint);

  const bool first_piece = first == 0, last_piece = end == total;
  if (first_piece || (last_piece && c.tie_word_embeddings)) {
    SEAM_ASSIGN_OR_RETURN(impl->embed, ctx.Load(names.embedding, {c.vocab_size, c.hidden_size}));
  }
  if (last_piece) {
    if (c.tie_word_embeddings) {
      impl->lm_head = impl->embed;
      if (!first_piece) impl->embed = Tensor();
    } else {
      SEAM_ASSIGN_OR_RETURN(impl->lm_head, ctx.Load("lm_head.weight", {c.vocab_size, c.hidden_size}));
    }
    impl->final_norm.eps = c.rms_norm_eps;
    SEAM_ASSIGN_OR_RETURN(impl->final_norm.weight, ctx.Load(names.prefix + "norm_f.weight", {c.hidden_size}));
  }

  const weights::ModelConfig config_copy = c;
  boundary::LayerStack stack(boundary::LayerStackOptions{
      topo, options.policy,
      [config_copy](int layer) {
        return std::vector<boundary::StageDeclaration>{DeclarationOf(config_copy.LayerKind(layer))};
      },
      first, end, total});
  for (int l = first; l < end; ++l) {
    SEAM_ASSIGN_OR_RETURN(std::unique_ptr<NemotronHBlock> block, LoadBlock(ctx, names, l));
    if (block->kind == HybridLayer::kAttention) block->cache_index = impl->attention_layers++;
    if (block->kind == HybridLayer::kMamba) block->cache_index = impl->mamba_layers++;
    SEAM_ASSIGN_OR_RETURN(auto boundaries,
                          SEAM_APPEND_STAGES(l, boundary::StageItem{DeclarationOf(block->kind), &block->norm,
                                                                    boundary::StageOptions{options.fusions}}));
    block->boundary = boundaries[0];
    impl->blocks.push_back(std::move(block));
  }
  SEAM_RETURN_IF_ERROR(stack.Close());
  return std::unique_ptr<NemotronHModel>(new NemotronHModel(std::move(impl)));
}

absl::StatusOr<std::unique_ptr<KvCache>> NemotronHModel::MakeCache(KvCacheOptions options) const {
  options.device = impl_->options.device;
  MambaStateShape state;
  for (const auto& block : impl_->blocks) {
    if (block->mamba != nullptr) state = block->mamba->StateShape(impl_->mamba_layers);
  }
  // A piece without attention layers still keeps one layer of blocks: the
  // blocks are the sequences' token accounting that every stage shares.
  return KvCache::Create(std::max<int64_t>(1, impl_->attention_layers), impl_->shard.kv_heads,
                         impl_->config.head_dim, options, state);
}

absl::StatusOr<boundary::Hidden> NemotronHModel::Impl::RunBlock(const NemotronHBlock& block, boundary::Hidden h,
                                                                boundary::ForwardBatch& batch,
                                                                const CacheBatch& step, KvCache& cache) const {
  SEAM_ASSIGN_OR_RETURN(Tensor x, block.boundary->Prepare(h, batch));
  if (block.kind == HybridLayer::kMlp) {
    std::unique_ptr<boundary::ExitScope> exit;
    if (block.boundary->has_fusions()) {
      SEAM_ASSIGN_OR_RETURN(exit, block.boundary->Exit(batch));
    }
    SEAM_ASSIGN_OR_RETURN(Tensor out, block.mlp->Forward(x));
    if (exit != nullptr) return exit->Finish(out);
    return block.boundary->Finish(out, batch);
  }
  // A mixer runs on every DP row: its compute gathers a scattered input.
  SEAM_ASSIGN_OR_RETURN(Tensor rows, boundary::GatherMixerInput(x, batch));
  Tensor out = rows;  // no rows: hand the (empty) input on
  if (rows.rows() != 0) {
    if (block.mamba != nullptr) {
      SEAM_ASSIGN_OR_RETURN(out, block.mamba->Forward(rows, step, cache, block.cache_index));
    } else {
      SEAM_ASSIGN_OR_RETURN(out, block.attention->Forward(rows, step, cache, block.cache_index));
    }
  }
  return block.boundary->Finish(out, batch);
}

absl::StatusOr<Tensor> NemotronHModel::ForwardPiece(boundary::ForwardBatch& batch, const StepInput& input,
                                                    KvCache& cache, const boundary::PipelineTensors* in,
                                                    boundary::PipelineTensors* out) {
  const Impl& m = *impl_;
  SEAM_RETURN_IF_ERROR(internal::CheckPieceArgs(is_first_piece(), is_last_piece(), in, out));
  SEAM_ASSIGN_OR_RETURN(internal::DeviceStep step, internal::PrepareStep(m.config, m.options, is_first_piece(),
                                                                         is_last_piece(), batch, input, in));
  SEAM_ASSIGN_OR_RETURN(boundary::Hidden h, m.Enter(batch, step.ids, in));
  SEAM_RETURN_IF_ERROR(internal::ReserveStep(cache, &step));
  return m.Run(std::move(h), batch, step.cache, cache, step.last_rows, out);
}

absl::StatusOr<Tensor> NemotronHModel::ForwardPieceStep(boundary::ForwardBatch& batch, const Tensor& ids,
                                                        const boundary::PipelineTensors* in, const CacheBatch& step,
                                                        KvCache& cache, const Tensor& last_rows,
                                                        boundary::PipelineTensors* out) {
  SEAM_RETURN_IF_ERROR(internal::CheckPieceArgs(is_first_piece(), is_last_piece(), in, out));
  if (is_first_piece() && (ids.rank() != 1 || ids.dim(0) != batch.rows.my_dp_rows())) {
    return absl::InvalidArgumentError(absl::StrCat("ids: expected [", batch.rows.my_dp_rows(), "], got ",
                                                   ShapeToString(ids.shape())));
  }
  SEAM_ASSIGN_OR_RETURN(boundary::Hidden h, impl_->Enter(batch, ids, in));
  return impl_->Run(std::move(h), batch, step, cache, last_rows, out);
}

absl::StatusOr<boundary::Hidden> NemotronHModel::Impl::Enter(boundary::ForwardBatch& batch, const Tensor& ids,
                                                             const boundary::PipelineTensors* in) const {
  if (in != nullptr) return boundary::FromPp(*in, batch, *blocks.front()->boundary);
  // An input-scattered batch embeds only this rank's slice of the tokens.
  const auto [first, count] = boundary::StackInputRows(batch);
  const Tensor mine = ids.Rows(first, count);
  Tensor x = Tensor::Empty({count, config.hidden_size}, options.dtype, options.device);
  SEAM_RETURN_IF_ERROR(kernels::Embedding(mine, embed, 0, x));
  return boundary::Start(batch, x);
}

absl::StatusOr<Tensor> NemotronHModel::Impl::Run(boundary::Hidden h, boundary::ForwardBatch& batch,
                                                 const CacheBatch& step, KvCache& cache, const Tensor& last_rows,
                                                 boundary::PipelineTensors* out) const {
  for (const auto& block : blocks) {
    SEAM_ASSIGN_OR_RETURN(h, RunBlock(*block, h, batch, step, cache));
  }
  if (options.end_layer != config.num_hidden_layers) {
    SEAM_ASSIGN_OR_RETURN(*out, boundary::ToPp(h, batch));
    if (out->hidden.defined() && !out->hidden.is_contiguous()) out->hidden = out->hidden.Clone();
    if (out->residual.defined() && !out->residual.is_contiguous()) out->residual = out->residual.Clone();
    return Tensor();
  }
  SEAM_ASSIGN_OR_RETURN(Tensor normed, boundary::FinalNorm(h, batch, final_norm));
  if (options.topology.attn_tp_rank() != 0) return Tensor();  // one rank of a DP group computes the logits
  Tensor chosen = normed;
  if (last_rows.defined()) {
    chosen = Tensor::Empty({last_rows.dim(0), config.hidden_size}, normed.dtype(), normed.device());
    SEAM_RETURN_IF_ERROR(kernels::GatherRows(normed, last_rows, chosen));
  }
  Tensor logits = Tensor::Empty({chosen.rows(), config.vocab_size}, DType::kF32, options.device);
  SEAM_RETURN_IF_ERROR(kernels::Matmul(chosen, lm_head, logits));
  return logits;
}

}  // namespace seam::models
