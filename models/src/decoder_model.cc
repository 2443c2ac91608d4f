// LoadDecoderModel (the model class the checkpoint's architecture names) and
// the whole-stack forwards every model shares.
#include "seam/models/decoder_model.h"

#include "absl/strings/str_cat.h"

#include "seam/models/nemotron_h_model.h"
#include "seam/models/qwen3_model.h"

namespace seam::models {

absl::StatusOr<Tensor> DecoderModel::Forward(boundary::ForwardBatch& batch, const StepInput& input, KvCache& cache) {
  if (!is_first_piece() || !is_last_piece()) {
    return absl::FailedPreconditionError(absl::StrCat("Forward runs the whole stack; this rank holds layers [",
                                                      options().first_layer, ", ", options().end_layer,
                                                      "): use ForwardPiece"));
  }
  return ForwardPiece(batch, input, cache, nullptr, nullptr);
}

absl::StatusOr<Tensor> DecoderModel::ForwardStep(boundary::ForwardBatch& batch, const Tensor& ids,
                                                 const CacheBatch& step, KvCache& cache, const Tensor& last_rows) {
  if (!is_first_piece() || !is_last_piece()) {
    return absl::FailedPreconditionError("ForwardStep runs the whole stack; this rank holds a pipeline piece");
  }
  return ForwardPieceStep(batch, ids, nullptr, step, cache, last_rows, nullptr);
}

absl::StatusOr<std::unique_ptr<DecoderModel>> LoadDecoderModel(const weights::Checkpoint& checkpoint,
                                                               const ModelOptions& options) {
  if (checkpoint.config().is_nemotron_h()) {
    auto model = NemotronHModel::Load(checkpoint, options);
    if (!model.ok()) return model.status();
    return std::unique_ptr<DecoderModel>(std::move(*model));
  }
  auto model = Qwen3Model::Load(checkpoint, options);
  if (!model.ok()) return model.status();
  return std::unique_ptr<DecoderModel>(std::move(*model));
}

}  // namespace seam::models
