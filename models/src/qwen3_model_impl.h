// Qwen3Model's layers on one rank (the ends of the stack are
// DecoderModel's), shared by the files that implement it (loading and the
// layers' forward in qwen3_model.cc, the two-batch overlap in
// qwen3_two_batch.cc). Private to the models library.
#pragma once

#include <memory>
#include <vector>

#include "seam/models/qwen3_model.h"
#include "src/qwen3_layers.h"

namespace seam::models {

struct Qwen3Model::Impl {
  AttentionShard shard;
  std::vector<std::unique_ptr<internal::DecoderLayer>> layers;

  absl::StatusOr<boundary::Hidden> RunLayer(const internal::DecoderLayer& layer, int64_t cache_layer, boundary::Hidden h,
                                            boundary::ForwardBatch& batch, const CacheBatch& step,
                                            KvCache& cache, const internal::CpAttention* cp = nullptr) const;
};

}  // namespace seam::models
