// Checkpoint: a Hugging Face model directory (config.json plus
// model.safetensors, or shards listed by model.safetensors.index.json).
// Tensors are found by name across shards and read as zero-copy views; a
// rank takes only its shard of each tensor (row or column split for TP,
// expert slices for MoE), copying only those bytes.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "seam/core/tensor.h"
#include "seam/weights/model_config.h"
#include "seam/weights/safetensors.h"

namespace seam::weights {

class Checkpoint {
 public:
  static absl::StatusOr<std::unique_ptr<Checkpoint>> Open(const std::string& model_dir);

  const ModelConfig& config() const { return config_; }
  const std::string& dir() const { return dir_; }
  bool Has(const std::string& name) const;
  // The file name (in dir()) of the shard holding tensor `name`; "" when no
  // shard does.
  std::string ShardOf(const std::string& name) const;

  // The whole tensor, checked against `expected_shape` and converted to
  // `dtype` (copy only when the dtype differs). NOT_FOUND naming the tensor
  // and the directory; INVALID_ARGUMENT naming the tensor, the expected and
  // the actual shape.
  absl::StatusOr<Tensor> Load(const std::string& name, const Shape& expected_shape, DType dtype) const;
  // Rows [part·n/parts, (part+1)·n/parts) of dim 0 (n = expected_shape[0]):
  // a zero-copy view when `dtype` matches the file. INVALID_ARGUMENT when
  // `parts` does not divide n or `part` is out of range.
  absl::StatusOr<Tensor> LoadRows(const std::string& name, const Shape& expected_shape, int part, int parts,
                                  DType dtype) const;
  // The same split along dim 1 (a contiguous copy; rank >= 2).
  absl::StatusOr<Tensor> LoadCols(const std::string& name, const Shape& expected_shape, int part, int parts,
                                  DType dtype) const;

 private:
  Checkpoint() = default;
  absl::StatusOr<Tensor> Find(const std::string& name, const Shape& expected_shape) const;
  std::string dir_;
  ModelConfig config_;
  std::vector<std::shared_ptr<SafetensorsFile>> files_;
  std::map<std::string, size_t> where_;  // tensor name -> index into files_
};

}  // namespace seam::weights
