// LongcatFlashModel: one rank's part of LongCat-Flash (LongcatFlashForCausalLM)
// on the boundary library. Each logical layer runs, on the main stack, an
// MLA attention (stage 1) and the shortcut MoE (stage 2, a sparse FFN that
// merges a branch); the MoE's prepared input also enters a branch
// (boundary/branch.h: BranchInput) of a dense MLP, a second MLA attention
// and a second dense MLP, whose owed sum BranchOutput completes and
// MergeBranch adds to the MoE's output. Attention heads split over
// attention TP, the MLPs' and experts' intermediate over TP; every module
// returns a partial sum its stage completes, and the model never calls a
// collective. The MLA attentions keep a latent cache (KvCache::CreateLatent,
// two cache layers per logical layer) and attend in the absorbed form
// (kernels/latent_attention.h) for prefill and decode alike. The MoE routes
// over routed and zero-computation experts on the device (softmax, the
// score-correction bias for the choice, routed_scaling_factor): the real
// experts run as Qwen3-MoE's (grouped by expert, fused kernels), a zero
// expert's slot holds its input on rank 0 of the FFN's sum. Nothing in a
// step reads the host, so decode steps may be CUDA graphs up to the
// experts' grouped limit (graph_max_rows). A rank may build any range of
// logical layers (a pipeline piece). One model per rank thread; the
// forwards are not reentrant.
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "seam/models/decoder_model.h"

namespace seam::models {

class LongcatFlashModel final : public DecoderModel {
 public:
  // INVALID_ARGUMENT for a layer range outside the model, a policy not
  // resolved, heads or intermediates that do not divide, or context
  // parallelism (attn_cp > 1); NOT_FOUND naming a missing tensor.
  static absl::StatusOr<std::unique_ptr<LongcatFlashModel>> Load(const weights::Checkpoint& checkpoint,
                                                                 const ModelOptions& options);
  ~LongcatFlashModel() override;

  int64_t layers() const override;
  // The fewest rows any layer's experts run on the device only (0 when they
  // run one by one: ModelOptions::moe_experts per-expert, or on the CPU).
  int64_t graph_max_rows() const override;
  // A latent cache of two layers per logical layer, rows of kv_lora_rank + qk_rope_head_dim.
  absl::StatusOr<std::unique_ptr<KvCache>> MakeCache(KvCacheOptions options) const override;
  const boundary::StageBoundary* entry_boundary() const override;

  struct Impl;

 private:
  LongcatFlashModel(const weights::ModelConfig& config, const ModelOptions& options);
  absl::Status LoadLayers(const weights::Checkpoint& checkpoint);
  absl::StatusOr<boundary::Hidden> RunLayers(boundary::Hidden h, boundary::ForwardBatch& batch,
                                             const CacheBatch& step, KvCache& cache,
                                             const internal::CpAttention* cp) const override;
  std::unique_ptr<Impl> impl_;
};

}  // namespace seam::models
