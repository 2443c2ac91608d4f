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

// What every loader needs: the checkpoint, the rank's place, dtype and
// device. The loads read the checkpoint (host) and place the result.
struct LoadContext {
  const weights::Checkpoint& checkpoint;
  const weights::ModelConfig& config;
  boundary::Topology topology;
  AttentionShard shard;
  DType dtype;
  Device device;
  MoeExperts moe_experts = MoeExperts::kAuto;
  kernels::ScanAlgorithm mamba_scan = kernels::ScanAlgorithm::kAuto;

  absl::StatusOr<Tensor> Load(const std::string& name, const Shape& shape) const;
  absl::StatusOr<Tensor> LoadRows(const std::string& name, const Shape& shape, int part, int parts) const;
  absl::StatusOr<Tensor> LoadCols(const std::string& name, const Shape& shape, int part, int parts) const;
  absl::StatusOr<Tensor> Place(const Tensor& host) const;
};


// The rows of `a` followed by the rows of `b` (same columns and dtype).
Tensor ConcatRows(const Tensor& a, const Tensor& b);

}  // namespace seam::models::internal
