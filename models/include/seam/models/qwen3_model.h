// Qwen3Model: one rank's part of a Qwen3 or Qwen3-MoE decoder (dense and
// sparse FFN layers) built on the boundary library. The rank holds only its
// weight shards: attention heads by attention-TP rank (KV heads replicated
// when there are fewer than attention-TP ranks), FFN and expert
// intermediates by TP rank; embeddings, norms, router and lm_head whole.
// Every output projection returns a partial sum that the layer's boundary
// completes; the model never calls a collective itself.
// A rank may build a layer range only (a pipeline piece): the first piece
// owns the embedding, the last the final norm and lm_head, a middle one
// neither. One model per rank thread; Forward is not reentrant.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "seam/boundary/forward_batch.h"
#include "seam/boundary/fusion.h"
#include "seam/boundary/layout.h"
#include "seam/boundary/pipeline_handoff.h"
#include "seam/boundary/reduction_policy.h"
#include "seam/core/device.h"
#include "seam/core/dtype.h"
#include "seam/core/tensor.h"
#include "seam/models/decoder_model.h"
#include "seam/models/kv_cache.h"
#include "seam/weights/checkpoint.h"
#include "seam/weights/model_config.h"

namespace seam::models {

class Qwen3Model final : public DecoderModel {
 public:
  // INVALID_ARGUMENT for a layer range outside the model, a policy not
  // resolved, or heads / intermediates that do not divide; NOT_FOUND naming
  // a missing tensor.
  static absl::StatusOr<std::unique_ptr<Qwen3Model>> Load(const weights::Checkpoint& checkpoint,
                                                          const ModelOptions& options);
  ~Qwen3Model() override;

  const AttentionShard& attention_shard() const;
  int64_t layers() const override;  // decoder layers this rank built
  // A MoE layer's experts run grouped on the device up to a number of
  // routes (ModelOptions::moe_experts): that many rows over top-k.
  int64_t graph_max_rows() const override;

  // A KV cache shaped for this rank's layers and KV heads.
  absl::StatusOr<std::unique_ptr<KvCache>> MakeCache(KvCacheOptions options) const override;
  const boundary::StageBoundary* entry_boundary() const override;

  // Forward (DecoderModel's, the whole stack through ForwardPiece) runs
  // `input` (this rank's DP group's sequences, whose counts `batch`'s
  // dp_rows hold) through the stack; reserves the cache blocks it needs.
  // Returns fp32 logits [rows, vocab]: every token, or each sequence's last,
  // on attention-TP rank 0 of each DP group; the other ranks skip the
  // lm_head (their logits would be the same) and return an undefined tensor.
  // The whole stack only (first and last piece); FAILED_PRECONDITION otherwise.
  //
  // ForwardPiece: one pipeline piece of a step. `in` is the previous
  // piece's handoff for this rank (nullptr on the first piece, required on
  // the others); `out` receives this piece's handoff (required on a
  // non-last piece, ignored on the last). The first piece enters through
  // the embedding of input's tokens; the others through boundary::FromPp,
  // so they read only the token counts and positions of `input`. Returns
  // the logits (as Forward) on the last piece and an undefined Tensor on the
  // others. The handoff tensors are contiguous tensors on this rank's rows
  // (the form in->rows / out->rows names). INVALID_ARGUMENT when `in` does
  // not fit the batch (rows or width) or a pointer is missing; nothing of
  // the cache is reserved then. A context-parallel batch splits each
  // sequence's tokens over the CP ranks.
  //
  // ForwardStep (through ForwardPieceStep): the whole stack on inputs
  // already on the model's device: token ids i32 [rows], the cache batch of
  // reserved spans (KvCache::BuildBatch or a CacheBatchPlan uploaded by the
  // caller), and last_rows i32 [S] (the rows whose logits come back;
  // undefined: all rows). ForwardPieceStep does so for any pipeline piece:
  // the first enters through `ids`, the others through `in` (on the model's
  // device; ids are then ignored), and a non-last piece writes its handoff
  // to `out` (on the device, contiguous). No host synchronisation at any TP
  // on CUDA (collectives are stream-ordered), so a decode step of any piece
  // can be captured (runtime::DecodeGraph). INVALID_ARGUMENT as ForwardPiece.

  // The whole stack (first and last piece) as a two-batch overlap
  // (TwoBatchStep): the step is checked and embedded whole, split into two
  // operation-scheduled microbatches whose operations are a layer's
  // attention (prepare → attention → finish) and its FFN (prepare → MLP or
  // MoE → CompleteNow) and, last, the final norm and lm_head, interleaved as
  // tbo.order says; returns the logits as Forward does (A's rows, then B's:
  // the step's order). The MoE never hands its finalize on here. The logits
  // equal bit for bit those of A and B run one after the other through
  // Forward (with defer_moe_finalize off): every sum has the same operands in
  // the same order. Against the unsplit Forward only the matmuls' row counts
  // differ, which BLAS may block differently (fp32 CPU: within 1e-5 relative,
  // models_two_batch_test). INVALID_ARGUMENT when the split does not fit the
  // step; FAILED_PRECONDITION on a pipeline piece, or with CUDA streams and
  // an input fusion provider (its buffers serve one call at a time).
  absl::StatusOr<Tensor> ForwardTwoBatch(boundary::ForwardBatch& batch, const StepInput& input, KvCache& cache,
                                         const TwoBatchStep& tbo);

  struct Impl;

 private:
  Qwen3Model(const weights::ModelConfig& config, const ModelOptions& options);
  absl::Status LoadLayers(const weights::Checkpoint& checkpoint);
  absl::StatusOr<boundary::Hidden> RunLayers(boundary::Hidden h, boundary::ForwardBatch& batch,
                                             const CacheBatch& step, KvCache& cache,
                                             const internal::CpAttention* cp) const override;
  bool runs_context_parallel() const override { return true; }
  std::unique_ptr<Impl> impl_;
};

}  // namespace seam::models
