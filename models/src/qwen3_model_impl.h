// Qwen3Model's state on one rank, shared by the files that implement it
// (loading and the forward in qwen3_model.cc, the two-batch overlap in
// qwen3_two_batch.cc). Private to the models library.
#pragma once

#include <memory>
#include <vector>

#include "seam/boundary/deferred_finalize.h"
#include "seam/boundary/residual_ops.h"
#include "seam/models/qwen3_model.h"
#include "src/qwen3_layers.h"

namespace seam::models {

struct Qwen3Model::Impl {
  weights::ModelConfig config;
  ModelOptions options;
  AttentionShard shard;
  Tensor embed;    // [V, H]
  Tensor lm_head;  // [V, H]; the embedding table when tied
  boundary::NormParams final_norm;
  // The final norm's fused finalize when the last layer's MoE may hand it on.
  std::shared_ptr<boundary::FinalizeNormService> finalize_norm;
  std::vector<std::unique_ptr<internal::DecoderLayer>> layers;

  absl::StatusOr<boundary::Hidden> RunLayer(const internal::DecoderLayer& layer, int64_t cache_layer, boundary::Hidden h,
                                            boundary::ForwardBatch& batch, const CacheBatch& step,
                                            KvCache& cache, const internal::CpAttention* cp = nullptr) const;
  // The device half of a step, with no host synchronisation of its own.
  // Enter: the embedding of `ids` (first piece) or the handoff `in`.
  absl::StatusOr<boundary::Hidden> Enter(boundary::ForwardBatch& batch, const Tensor& ids,
                                         const boundary::PipelineTensors* in) const;
  // Every layer, then leave: logits of `last_rows` (every row when
  // undefined) on the last piece, the handoff `out` on the others.
  // `cp`: the attention inputs of a context-parallel batch (null otherwise).
  absl::StatusOr<Tensor> Run(boundary::Hidden h, boundary::ForwardBatch& batch, const CacheBatch& step,
                             KvCache& cache, const Tensor& last_rows, boundary::PipelineTensors* out,
                             const internal::CpAttention* cp = nullptr) const;
  // fp32 logits of the final norm's rows `last_rows` (all when undefined) on
  // attention-TP rank 0 of CP rank 0; an undefined tensor on the other ranks.
  absl::StatusOr<Tensor> Logits(const Tensor& normed, const Tensor& last_rows) const;
};

}  // namespace seam::models
