// LoadDecoderModel: the model class the checkpoint's architecture names.
#include "seam/models/decoder_model.h"

#include "seam/models/nemotron_h_model.h"
#include "seam/models/qwen3_model.h"

namespace seam::models {

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
