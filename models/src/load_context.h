// The loading context every model's modules share (the checkpoint, the
// rank's place, dtype and device) and the row helper they use. Private to
// the models library.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "seam/boundary/layout.h"
#include "seam/core/tensor.h"
#include "seam/models/decoder_model.h"
#include "seam/weights/checkpoint.h"

namespace seam::models::internal {

// What every loader needs: the checkpoint, the rank's attention shard and
// the model's options whole (its place, dtype, device and choices). The
// loads read the checkpoint (host) and place the result.
struct LoadContext {
  const weights::Checkpoint& checkpoint;
  const weights::ModelConfig& config;
  AttentionShard shard;
  const ModelOptions& options;

  absl::StatusOr<Tensor> Load(const std::string& name, const Shape& shape) const;
  absl::StatusOr<Tensor> LoadRows(const std::string& name, const Shape& shape, int part, int parts) const;
  absl::StatusOr<Tensor> LoadCols(const std::string& name, const Shape& shape, int part, int parts) const;
  absl::StatusOr<Tensor> Place(const Tensor& host) const;
};

// An attention layer's projections on this rank, read on the host in the
// compute dtype: q_proj's rows and o_proj's columns of its attention-TP
// rank's heads, k_proj's and v_proj's rows of its KV-head part (the shard).
struct AttentionWeights {
  Tensor wq, wk, wv, wo;
};
// `names`: the checkpoint names of q_proj, k_proj, v_proj and o_proj.
absl::StatusOr<AttentionWeights> LoadAttentionWeights(const LoadContext& ctx, const std::string (&names)[4]);

// The rows of `a` followed by the rows of `b` (same columns and dtype).
Tensor ConcatRows(const Tensor& a, const Tensor& b);

}  // namespace seam::models::internal
