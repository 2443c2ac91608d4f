// Which tensor a model's output projection (lm_head) reads. The config's
// tie_word_embeddings says the embedding table; a file may still carry its
// own lm_head.weight: transformers' NemotronH class never ties and saves
// one beside a tied config, and transformers 5 unties a tied model whose
// file holds both (it warns, then computes with the stored head). seam
// computes what transformers computes: the stored head whenever the file
// has one, the embedding table only when the config ties and the file has
// no head. Pure decision over the config and the checkpoint's names.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "seam/weights/checkpoint.h"

namespace seam::weights {

struct OutputHead {
  std::string tensor;         // the tensor to read as lm_head [vocab, hidden]
  bool is_embedding = false;  // `tensor` is the embedding table (tied)
  // Not empty when config.json and the file disagree (tied config, stored
  // head): the warning to log, naming both.
  std::string disagreement;
};

// `embedding` is the checkpoint's name of the embedding table. NOT_FOUND
// when the config does not tie and the file has no lm_head.weight.
absl::StatusOr<OutputHead> ResolveOutputHead(const Checkpoint& checkpoint, const std::string& embedding);

}  // namespace seam::weights
