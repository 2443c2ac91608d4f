// DecoderModel: one rank's part of a decoder-only language model built on
// the boundary library (Qwen3Model, NemotronHModel), as the runtime drives
// it: load the rank's shards for a layer range, make its cache, run a step
// or a pipeline piece of one. The options and step inputs every model takes
// live here too. One model per rank thread; the forwards are not reentrant.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "seam/boundary/forward_batch.h"
#include "seam/boundary/fusion.h"
#include "seam/boundary/layout.h"
#include "seam/boundary/operation_schedule.h"
#include "seam/boundary/deferred_finalize.h"
#include "seam/boundary/pipeline_handoff.h"
#include "seam/boundary/reduction_policy.h"
#include "seam/boundary/residual_ops.h"
#include "seam/boundary/stage_boundary.h"
#include "seam/core/device.h"
#include "seam/core/dtype.h"
#include "seam/core/tensor.h"
#include "seam/kernels/ops.h"
#include "seam/models/kv_cache.h"
#include "seam/weights/checkpoint.h"
#include "seam/weights/model_config.h"

namespace seam::models {

// How a Qwen3-MoE block runs its experts, once its routes are grouped by
// expert on the device (kernels/moe_experts.h).
enum class MoeExperts {
  // On CUDA grouped on the device at every batch size, nothing on the
  // host, so every step can be a CUDA graph: per batch row count the faster
  // of kFused and kGrouped as both were timed at load on the layer's
  // weights (once per expert shape in the process); the fused pair runs the
  // decode GEMV up to kernels::kTensorCorePairs routes, the tensor-core
  // grouped GEMM above (bf16 / f16; f32 and shapes the tensor-core kernel
  // does not take: the GEMV up to 1024 routes, one by one above). On the
  // host: one by one.
  kAuto,
  // The fused kernels whenever the batch fits (kernels::kMaxExpertPairs
  // routes), on any device (the host runs their CPU reference).
  kFused,
  // The earlier grouped GEMV (ExpertMatmul per projection and a separate
  // SiLU-mul) whenever the batch fits, on any device.
  kGrouped,
  // Always one by one: the group offsets read on the host, each expert's
  // rows run through its own matmuls.
  kPerExpert,
  // The earlier default: kGrouped on CUDA up to 1024 routes (rows × top-k),
  // one by one above and on the host.
  kClassic,
};

// "auto", "fused", "grouped", "per-expert", "classic"; INVALID_ARGUMENT
// naming the choices for anything else.
absl::StatusOr<MoeExperts> ParseMoeExperts(const std::string& text);
const char* MoeExpertsName(MoeExperts experts);

struct ModelOptions {
  boundary::Topology topology;
  boundary::ReductionPolicy policy = boundary::ReductionPolicy::kAr;  // resolved (never kAuto)
  DType dtype = DType::kF32;  // compute and weight dtype
  int first_layer = 0;        // first decoder layer this rank builds (> 0: not the first piece)
  int end_layer = -1;         // one past the last one (-1: to the last layer, the last piece)
  Device device = Device::CPU();  // where weights, cache and the forward live
  // Input fusions offered at every stage (boundary/fusion.h), e.g. the IPC
  // one-shot all-reduce + add + norm of a CUDA TP group; null: none.
  std::shared_ptr<boundary::FusionProvider> fusions;
  // Qwen3-MoE whose last layer is sparse: that layer's MoE hands its finalize
  // to the final norm (boundary::DeferredFinalize), which runs finalize, sum,
  // residual add and norm as one operation (the built-in FinalizeNormService).
  // Off: the MoE finalizes and the exit completes its sum first.
  bool defer_moe_finalize = true;
  MoeExperts moe_experts = MoeExperts::kAuto;
  // Nemotron-H's Mamba2 scan (kernels::SelectiveScanParams::algorithm): kAuto
  // runs prefills as the chunked SSD on CUDA's tensor cores where the kernel
  // serves and decode as the sequential recurrence; kSequential keeps the
  // sequential kernel for every step. The host always runs the recurrence.
  kernels::ScanAlgorithm mamba_scan = kernels::ScanAlgorithm::kAuto;
};

// One sequence's part of a step.
struct SequenceStep {
  uint64_t sequence = 0;
  std::vector<int32_t> tokens;  // the tokens this step runs
  int64_t start = 0;            // position of tokens[0] (tokens already in the cache)
  int dp_group = -1;            // the attention-DP group that holds it; -1: the runner places it
};

// The sequences of this rank's attention-DP group for one step.
struct StepInput {
  std::vector<SequenceStep> sequences;
  bool all_logits = false;  // logits of every token, or of each sequence's last token only
};

// A step run as a two-batch overlap (boundary/two_batch.h): this DP group's
// sequences split into two microbatches, A (the first a_sequences) and B
// (the rest), run operation by operation so that one's collectives overlap
// the other's compute. The split is the caller's decision, the same on every
// rank: a_dp_rows holds A's token rows in every DP group.
struct TwoBatchStep {
  int a_sequences = 0;
  std::vector<int64_t> a_dp_rows;
  boundary::TboOrder order = boundary::TboOrder::kAlternate;
  // Each microbatch's communicators (unset: the batch's) and CUDA stream
  // (nullptr: the caller's current one). On GPUs give each its own stream and
  // its own communicators bound to it, so that one's collective runs while
  // the other computes; the caller's stream waits for both at the end.
  boundary::StageComms comms[2];
  void* streams[2] = {nullptr, nullptr};
};
// The split of `input` whose two parts' token counts differ least (A gets
// the first sequences), with one DP group: a_dp_rows = {A's tokens}.
TwoBatchStep BalancedTwoBatchStep(const StepInput& input);

// KV-head arithmetic of one attention-TP rank.
struct AttentionShard {
  int64_t q_heads = 0;        // local query heads
  int64_t kv_heads = 0;       // local KV heads
  int kv_part = 0, kv_parts = 1;  // the rows of k/v_proj this rank loads: part kv_part of kv_parts
  static absl::StatusOr<AttentionShard> Of(const weights::ModelConfig& config, int attn_tp, int attn_tp_rank);
};

namespace internal {
struct CpAttention;
struct LoadContext;
}  // namespace internal

// The skeleton every model shares: a piece enters through the embedding
// (first piece) or the previous piece's handoff, runs its layers between
// their boundaries (RunLayers, each model's own), and leaves through the
// final norm and the lm_head (last piece) or a handoff. Forward /
// ForwardPiece take host step inputs and reserve the cache; ForwardStep /
// ForwardPieceStep take device inputs and a reserved cache batch. The
// contract of each is Qwen3Model's (qwen3_model.h).
class DecoderModel {
 public:
  virtual ~DecoderModel();
  const weights::ModelConfig& config() const { return config_; }
  const ModelOptions& options() const { return options_; }  // end_layer resolved
  virtual int64_t layers() const = 0;  // layers this rank built
  bool is_first_piece() const { return options_.first_layer == 0; }  // enters through the embedding
  bool is_last_piece() const { return options_.end_layer == config_.num_hidden_layers; }  // leaves through lm_head
  // The most token rows (over every attention-DP group) a decode step
  // recorded as a CUDA graph (runtime::DecodeGraph) may carry; 0: none can
  // be recorded. Unbounded unless a layer's work needs the host for some
  // batches (a MoE block running its experts per expert).
  static constexpr int64_t kUnboundedGraphRows = int64_t{1} << 40;
  virtual int64_t graph_max_rows() const { return kUnboundedGraphRows; }
  virtual absl::StatusOr<std::unique_ptr<KvCache>> MakeCache(KvCacheOptions options) const = 0;
  // The boundary of the piece's first stage (bound: its plan names its
  // producer, whose declaration fixes the form a handoff arrives in); null
  // for a piece without layers.
  virtual const boundary::StageBoundary* entry_boundary() const = 0;
  // The whole stack (first and last piece) through ForwardPiece;
  // FAILED_PRECONDITION on a rank holding only a pipeline piece.
  absl::StatusOr<Tensor> Forward(boundary::ForwardBatch& batch, const StepInput& input, KvCache& cache);
  absl::StatusOr<Tensor> ForwardPiece(boundary::ForwardBatch& batch, const StepInput& input, KvCache& cache,
                                      const boundary::PipelineTensors* in, boundary::PipelineTensors* out);
  // The whole stack through ForwardPieceStep; FAILED_PRECONDITION on a pipeline piece.
  absl::StatusOr<Tensor> ForwardStep(boundary::ForwardBatch& batch, const Tensor& ids, const CacheBatch& step,
                                     KvCache& cache, const Tensor& last_rows = Tensor());
  absl::StatusOr<Tensor> ForwardPieceStep(boundary::ForwardBatch& batch, const Tensor& ids,
                                          const boundary::PipelineTensors* in, const CacheBatch& step, KvCache& cache,
                                          const Tensor& last_rows, boundary::PipelineTensors* out);

 protected:
  // `options` with end_layer resolved (-1: the last layer) and checked:
  // INVALID_ARGUMENT for an empty layer range or one outside the model, or
  // a reduction policy not resolved.
  static absl::StatusOr<ModelOptions> CheckedOptions(const weights::ModelConfig& config, ModelOptions options);
  DecoderModel(const weights::ModelConfig& config, const ModelOptions& options);

  // The ends of the stack: the embedding table [V, H] (first piece, or a
  // tied last piece, which reads it as its lm_head), the final norm and the
  // lm_head [V, H] (last piece); a final norm that runs a deferred MoE
  // finalize fused, when the model hands one on.
  struct Ends {
    Tensor embed, lm_head;
    boundary::NormParams final_norm;
    std::shared_ptr<boundary::FinalizeNormService> finalize_norm;
  };
  // Loads the ends this piece holds under the checkpoint's names.
  absl::Status LoadEnds(const internal::LoadContext& ctx, const std::string& embedding, const std::string& final_norm);

  // The piece's layers, from the entered stream to the one that leaves.
  // `cp`: the attention inputs of a context-parallel batch (null otherwise).
  virtual absl::StatusOr<boundary::Hidden> RunLayers(boundary::Hidden h, boundary::ForwardBatch& batch,
                                                     const CacheBatch& step, KvCache& cache,
                                                     const internal::CpAttention* cp) const = 0;
  // Whether the model runs context-parallel batches (its attention splits a
  // sequence's tokens over the CP ranks).
  virtual bool runs_context_parallel() const { return false; }

  // The device half of a step, with no host synchronisation of its own.
  // Enter: the embedding of `ids` (first piece) or the handoff `in`.
  absl::StatusOr<boundary::Hidden> Enter(boundary::ForwardBatch& batch, const Tensor& ids,
                                         const boundary::PipelineTensors* in) const;
  // Leave: the handoff `out` on a non-last piece (an undefined Tensor
  // returned), else the final norm and the logits of `last_rows`.
  absl::StatusOr<Tensor> Leave(boundary::Hidden h, boundary::ForwardBatch& batch, const Tensor& last_rows,
                               boundary::PipelineTensors* out) const;
  // fp32 logits of the final norm's rows `last_rows` (all when undefined) on
  // attention-TP rank 0 of CP rank 0; an undefined tensor on the other ranks.
  absl::StatusOr<Tensor> Logits(const Tensor& normed, const Tensor& last_rows) const;

  Ends ends_;

 private:
  weights::ModelConfig config_;
  ModelOptions options_;
};

// The model the checkpoint's architecture names (Qwen3 / Qwen3-MoE,
// Nemotron-H or LongCat-Flash), loaded for `options`; errors as each model's Load.
absl::StatusOr<std::unique_ptr<DecoderModel>> LoadDecoderModel(const weights::Checkpoint& checkpoint,
                                                               const ModelOptions& options);

}  // namespace seam::models
