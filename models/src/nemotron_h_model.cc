// NemotronHModel: loading this rank's shards inside a layer stack (one stage
// per pattern character) and its blocks' forward, each between its
// boundary's Prepare and Finish; entering and leaving the stack (embedding
// or handoff, final norm and lm_head or handoff) are DecoderModel's.
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
  AttentionShard shard;
  std::vector<std::unique_ptr<NemotronHBlock>> blocks;
  int64_t attention_layers = 0, mamba_layers = 0;

  absl::StatusOr<boundary::Hidden> RunBlock(const NemotronHBlock& block, boundary::Hidden h,
                                            boundary::ForwardBatch& batch, const CacheBatch& step,
                                            KvCache& cache) const;
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

NemotronHModel::NemotronHModel(const weights::ModelConfig& config, const ModelOptions& options)
    : DecoderModel(config, options), impl_(std::make_unique<Impl>()) {}
NemotronHModel::~NemotronHModel() = default;
int64_t NemotronHModel::layers() const { return static_cast<int64_t>(impl_->blocks.size()); }

absl::StatusOr<std::unique_ptr<NemotronHModel>> NemotronHModel::Load(const weights::Checkpoint& checkpoint,
                                                                     const ModelOptions& options) {
  const weights::ModelConfig& c = checkpoint.config();
  const boundary::Topology& topo = options.topology;
  if (topo.attn_cp > 1) {
    // A Mamba layer's recurrence runs token after token through one
    // sequence's state: its tokens cannot be split over CP ranks.
    return absl::InvalidArgumentError(absl::StrCat("Nemotron-H's Mamba layers cannot use context parallelism (attn_cp ",
                                                   topo.attn_cp, "); run it with attn_cp 1"));
  }
  SEAM_ASSIGN_OR_RETURN(const ModelOptions checked, CheckedOptions(c, options));
  if (c.residual_in_fp32 && options.dtype != DType::kF32) {
    return absl::UnimplementedError("residual_in_fp32 with a compute dtype other than f32 is not supported");
  }
  SEAM_RETURN_IF_ERROR(weights::ValidateParallel(c, topo.tp, topo.attn_dp));
  std::unique_ptr<NemotronHModel> model(new NemotronHModel(c, checked));
  SEAM_RETURN_IF_ERROR(model->LoadBlocks(checkpoint));
  return model;
}

absl::Status NemotronHModel::LoadBlocks(const weights::Checkpoint& checkpoint) {
  const weights::ModelConfig& c = config();
  const ModelOptions& o = options();
  const boundary::Topology& topo = o.topology;
  impl_->shard = AttentionShard{1, 1, 0, 1};
  if (c.hybrid_override_pattern.find('*') != std::string::npos) {
    SEAM_ASSIGN_OR_RETURN(impl_->shard, AttentionShard::Of(c, topo.attn_tp(), topo.attn_tp_rank()));
  }
  const internal::LoadContext ctx{checkpoint, c, impl_->shard, o};
  const internal::NemotronHNames names = internal::NemotronHNames::Of(checkpoint);
  SEAM_RETURN_IF_ERROR(LoadEnds(ctx, names.embedding, names.prefix + "norm_f.weight"));
  const weights::ModelConfig config_copy = c;
  boundary::LayerStack stack(boundary::LayerStackOptions{
      topo, o.policy,
      [config_copy](int layer) {
        return std::vector<boundary::StageDeclaration>{DeclarationOf(config_copy.LayerKind(layer))};
      },
      o.first_layer, o.end_layer, static_cast<int>(c.num_hidden_layers)});
  for (int l = o.first_layer; l < o.end_layer; ++l) {
    SEAM_ASSIGN_OR_RETURN(std::unique_ptr<NemotronHBlock> block, LoadBlock(ctx, names, l));
    if (block->kind == HybridLayer::kAttention) block->cache_index = impl_->attention_layers++;
    if (block->kind == HybridLayer::kMamba) block->cache_index = impl_->mamba_layers++;
    SEAM_ASSIGN_OR_RETURN(auto boundaries,
                          SEAM_APPEND_STAGES(l, boundary::StageItem{DeclarationOf(block->kind), &block->norm,
                                                                    boundary::StageOptions{o.fusions}}));
    block->boundary = boundaries[0];
    impl_->blocks.push_back(std::move(block));
  }
  return stack.Close();
}

const boundary::StageBoundary* NemotronHModel::entry_boundary() const {
  return impl_->blocks.empty() ? nullptr : impl_->blocks.front()->boundary.get();
}

absl::StatusOr<std::unique_ptr<KvCache>> NemotronHModel::MakeCache(KvCacheOptions options) const {
  options.device = this->options().device;
  MambaStateShape state;
  for (const auto& block : impl_->blocks) {
    if (block->mamba != nullptr) state = block->mamba->StateShape(impl_->mamba_layers);
  }
  // A piece without attention layers still keeps one layer of blocks: the
  // blocks are the sequences' token accounting that every stage shares.
  return KvCache::Create(std::max<int64_t>(1, impl_->attention_layers), impl_->shard.kv_heads,
                         config().head_dim, options, state);
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

absl::StatusOr<boundary::Hidden> NemotronHModel::RunLayers(boundary::Hidden h, boundary::ForwardBatch& batch,
                                                           const CacheBatch& step, KvCache& cache,
                                                           const internal::CpAttention*) const {
  for (const auto& block : impl_->blocks) {
    SEAM_ASSIGN_OR_RETURN(h, impl_->RunBlock(*block, h, batch, step, cache));
  }
  return h;
}

}  // namespace seam::models
