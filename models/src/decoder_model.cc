// DecoderModel's skeleton, shared by every model: the options check, the
// ends of the stack (embedding, final norm, lm_head), a piece's forward
// around the model's own layers, and LoadDecoderModel.
#include "seam/models/decoder_model.h"

#include "absl/strings/str_cat.h"
#include "seam/boundary/stream_ops.h"
#include "seam/core/logging.h"
#include "seam/core/status.h"
#include "seam/kernels/ops.h"
#include "seam/models/longcat_flash_model.h"
#include "seam/models/nemotron_h_model.h"
#include "seam/models/qwen3_model.h"
#include "seam/weights/output_head.h"
#include "src/cp_attention.h"
#include "src/load_context.h"
#include "src/step_inputs.h"

namespace seam::models {

DecoderModel::DecoderModel(const weights::ModelConfig& config, const ModelOptions& options)
    : config_(config), options_(options) {}

DecoderModel::~DecoderModel() = default;

absl::StatusOr<ModelOptions> DecoderModel::CheckedOptions(const weights::ModelConfig& config, ModelOptions options) {
  const int total = static_cast<int>(config.num_hidden_layers);
  if (options.end_layer < 0) options.end_layer = total;
  const int first = options.first_layer, end = options.end_layer;
  if (first < 0 || first >= end || end > total) {
    return absl::InvalidArgumentError(absl::StrCat("layer range [", first, ", ", end,
                                                   ") is not a non-empty range inside the model's ", total,
                                                   " layers"));
  }
  if (options.policy == boundary::ReductionPolicy::kAuto) {
    return absl::InvalidArgumentError("reduction policy must be resolved (ResolveReductionPolicy) before loading");
  }
  return options;
}

absl::Status DecoderModel::LoadEnds(const internal::LoadContext& ctx, const std::string& embedding,
                                    const std::string& final_norm) {
  const weights::ModelConfig& c = config_;
  const bool first = is_first_piece(), last = is_last_piece();
  const Shape shape{c.vocab_size, c.hidden_size};
  if (first) {
    SEAM_ASSIGN_OR_RETURN(ends_.embed, ctx.Load(embedding, shape));
  }
  if (!last) return absl::OkStatus();
  // The head as weights::ResolveOutputHead says: the file's own lm_head
  // whenever it has one, the embedding table only for a tied config without.
  SEAM_ASSIGN_OR_RETURN(const weights::OutputHead head, weights::ResolveOutputHead(ctx.checkpoint, embedding));
  if (!head.disagreement.empty() && ctx.options.topology.tp_rank == 0) SEAM_LOG_WARN("{}", head.disagreement);
  if (head.is_embedding && first) {
    ends_.lm_head = ends_.embed;
  } else {
    SEAM_ASSIGN_OR_RETURN(ends_.lm_head, ctx.Load(head.tensor, shape));
  }
  ends_.final_norm.eps = c.rms_norm_eps;
  SEAM_ASSIGN_OR_RETURN(ends_.final_norm.weight, ctx.Load(final_norm, {c.hidden_size}));
  return absl::OkStatus();
}

absl::StatusOr<Tensor> DecoderModel::Forward(boundary::ForwardBatch& batch, const StepInput& input, KvCache& cache) {
  if (!is_first_piece() || !is_last_piece()) {
    return absl::FailedPreconditionError(absl::StrCat("Forward runs the whole stack; this rank holds layers [",
                                                      options_.first_layer, ", ", options_.end_layer,
                                                      "): use ForwardPiece"));
  }
  return ForwardPiece(batch, input, cache, nullptr, nullptr);
}

absl::StatusOr<Tensor> DecoderModel::ForwardPiece(boundary::ForwardBatch& batch, const StepInput& input,
                                                  KvCache& cache, const boundary::PipelineTensors* in,
                                                  boundary::PipelineTensors* out) {
  SEAM_RETURN_IF_ERROR(internal::CheckPieceArgs(is_first_piece(), is_last_piece(), in, out));
  SEAM_ASSIGN_OR_RETURN(internal::DeviceStep step, internal::PrepareStep(config_, options_, is_first_piece(),
                                                                         is_last_piece(), batch, input, in));
  // A context-parallel batch splits each sequence over the CP ranks.
  const bool cp = batch.variant == boundary::BatchVariant::kContextParallel && runs_context_parallel();
  if (cp) {
    std::vector<int64_t> rows;
    for (const SequenceStep& s : input.sequences) rows.push_back(static_cast<int64_t>(s.tokens.size()));
    SEAM_RETURN_IF_ERROR(batch.SetSequenceRows(std::move(rows)));
  }
  SEAM_ASSIGN_OR_RETURN(boundary::Hidden h, Enter(batch, step.ids, in));
  SEAM_RETURN_IF_ERROR(internal::ReserveStep(cache, &step));
  internal::CpAttention cp_attention;
  if (cp) {
    SEAM_ASSIGN_OR_RETURN(cp_attention, internal::BuildCpAttention(cache, step.spans, batch, options_.device));
  }
  SEAM_ASSIGN_OR_RETURN(h, RunLayers(std::move(h), batch, step.cache, cache, cp ? &cp_attention : nullptr));
  return Leave(std::move(h), batch, step.last_rows, out);
}

absl::StatusOr<Tensor> DecoderModel::ForwardStep(boundary::ForwardBatch& batch, const Tensor& ids,
                                                 const CacheBatch& step, KvCache& cache, const Tensor& last_rows) {
  if (!is_first_piece() || !is_last_piece()) {
    return absl::FailedPreconditionError("ForwardStep runs the whole stack; this rank holds a pipeline piece");
  }
  return ForwardPieceStep(batch, ids, nullptr, step, cache, last_rows, nullptr);
}

absl::StatusOr<Tensor> DecoderModel::ForwardPieceStep(boundary::ForwardBatch& batch, const Tensor& ids,
                                                      const boundary::PipelineTensors* in, const CacheBatch& step,
                                                      KvCache& cache, const Tensor& last_rows,
                                                      boundary::PipelineTensors* out) {
  SEAM_RETURN_IF_ERROR(internal::CheckPieceArgs(is_first_piece(), is_last_piece(), in, out));
  if (batch.variant == boundary::BatchVariant::kContextParallel) {
    return absl::FailedPreconditionError("a context-parallel batch needs its sequences: run it through ForwardPiece");
  }
  if (is_first_piece() && (ids.rank() != 1 || ids.dim(0) != batch.rows.my_dp_rows())) {
    return absl::InvalidArgumentError(absl::StrCat("ids: expected [", batch.rows.my_dp_rows(), "], got ",
                                                   ShapeToString(ids.shape())));
  }
  SEAM_ASSIGN_OR_RETURN(boundary::Hidden h, Enter(batch, ids, in));
  SEAM_ASSIGN_OR_RETURN(h, RunLayers(std::move(h), batch, step, cache, nullptr));
  return Leave(std::move(h), batch, last_rows, out);
}

absl::StatusOr<boundary::Hidden> DecoderModel::Enter(boundary::ForwardBatch& batch, const Tensor& ids,
                                                     const boundary::PipelineTensors* in) const {
  if (in != nullptr) return boundary::FromPp(*in, batch, *entry_boundary());
  // An input-scattered batch embeds only this rank's slice of the tokens.
  const auto [first, count] = boundary::StackInputRows(batch);
  const Tensor mine = ids.Rows(first, count);
  Tensor x = Tensor::Empty({count, config_.hidden_size}, options_.dtype, options_.device);
  SEAM_RETURN_IF_ERROR(kernels::Embedding(mine, ends_.embed, 0, x));
  return boundary::Start(batch, x);
}

absl::StatusOr<Tensor> DecoderModel::Leave(boundary::Hidden h, boundary::ForwardBatch& batch, const Tensor& last_rows,
                                           boundary::PipelineTensors* out) const {
  if (!is_last_piece()) {
    SEAM_ASSIGN_OR_RETURN(*out, boundary::ToPp(h, batch));
    if (out->hidden.defined() && !out->hidden.is_contiguous()) out->hidden = out->hidden.Clone();
    if (out->residual.defined() && !out->residual.is_contiguous()) out->residual = out->residual.Clone();
    return Tensor();
  }
  boundary::FinalNormOptions final_options;
  final_options.finalize_norm = ends_.finalize_norm.get();  // a finalize handoff runs fused
  SEAM_ASSIGN_OR_RETURN(Tensor normed, boundary::FinalNorm(h, batch, ends_.final_norm, final_options));
  return Logits(normed, last_rows);
}

absl::StatusOr<Tensor> DecoderModel::Logits(const Tensor& normed, const Tensor& last_rows) const {
  // Every rank of a DP group holds the same normed rows: one computes the logits.
  if (options_.topology.attn_tp_rank() != 0 || options_.topology.cp_rank() != 0) return Tensor();
  Tensor chosen = normed;
  if (last_rows.defined()) {
    chosen = Tensor::Empty({last_rows.dim(0), config_.hidden_size}, normed.dtype(), normed.device());
    SEAM_RETURN_IF_ERROR(kernels::GatherRows(normed, last_rows, chosen));
  }
  Tensor logits = Tensor::Empty({chosen.rows(), config_.vocab_size}, DType::kF32, options_.device);
  SEAM_RETURN_IF_ERROR(kernels::Matmul(chosen, ends_.lm_head, logits));
  return logits;
}

absl::StatusOr<std::unique_ptr<DecoderModel>> LoadDecoderModel(const weights::Checkpoint& checkpoint,
                                                               const ModelOptions& options) {
  if (checkpoint.config().is_nemotron_h()) {
    auto model = NemotronHModel::Load(checkpoint, options);
    if (!model.ok()) return model.status();
    return std::unique_ptr<DecoderModel>(std::move(*model));
  }
  if (checkpoint.config().is_longcat_flash()) {
    auto model = LongcatFlashModel::Load(checkpoint, options);
    if (!model.ok()) return model.status();
    return std::unique_ptr<DecoderModel>(std::move(*model));
  }
  auto model = Qwen3Model::Load(checkpoint, options);
  if (!model.ok()) return model.status();
  return std::unique_ptr<DecoderModel>(std::move(*model));
}

}  // namespace seam::models
