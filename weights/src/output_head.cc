// The output head's tensor (see output_head.h).
#include "seam/weights/output_head.h"

#include "absl/strings/str_cat.h"

namespace seam::weights {

absl::StatusOr<OutputHead> ResolveOutputHead(const Checkpoint& checkpoint, const std::string& embedding) {
  constexpr char kHead[] = "lm_head.weight";
  const bool tied = checkpoint.config().tie_word_embeddings;
  OutputHead head;
  if (checkpoint.Has(kHead)) {
    head.tensor = kHead;
    if (tied) {
      head.disagreement = absl::StrCat(checkpoint.dir(), ": config.json sets tie_word_embeddings but the checkpoint "
                                       "holds its own lm_head.weight; computing with the stored lm_head.weight, as "
                                       "transformers does, not with ", embedding);
    }
    return head;
  }
  if (!tied) {
    return absl::NotFoundError(absl::StrCat(checkpoint.dir(), ": config.json sets tie_word_embeddings false but the "
                                            "checkpoint has no lm_head.weight"));
  }
  head.tensor = embedding;
  head.is_embedding = true;
  return head;
}

}  // namespace seam::weights
