// DecodeGraph: the decode step of a whole-stack model on one GPU (TP 1),
// recorded once as a CUDA graph and replayed, so a step costs one upload and
// one graph launch instead of hundreds of kernel launches.
//
// A graph serves exactly `batch_size` sequences of one token each, with block
// tables `max_context / block_size` wide (rounded up). Its inputs (token ids,
// positions, slots, query starts, context lengths, block tables) are staged
// in one pinned host buffer and uploaded with one copy into fixed device
// buffers the graph reads; the logits land in a fixed device buffer. The
// cache bookkeeping (reserving blocks) stays on the host, as in an eager step.
#pragma once

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "seam/core/cuda_graph.h"
#include "seam/core/tensor.h"
#include "seam/models/kv_cache.h"
#include "seam/models/qwen3_model.h"

namespace seam::runtime {

class DecodeGraph {
 public:
  // Warms the model up once on the graph's stream, then captures a step.
  // FAILED_PRECONDITION unless the model is the whole stack at TP 1 on CUDA
  // and the cache lives on the same device.
  static absl::StatusOr<std::unique_ptr<DecodeGraph>> Capture(models::Qwen3Model& model, models::KvCache& cache, int64_t batch_size,
                                                              int64_t max_context);

  int64_t batch_size() const { return batch_size_; }
  int64_t max_context() const { return table_width_ * cache_.block_size(); }
  // The stream the graph runs on; the logits of Step are ordered on it.
  const CudaStream& stream() const { return stream_; }

  // One decode step: exactly batch_size sequences with one token each whose
  // earlier tokens are in the cache (INVALID_ARGUMENT otherwise), reserving
  // the blocks they need (RESOURCE_EXHAUSTED when the cache is full,
  // OUT_OF_RANGE past max_context, before anything is reserved). Returns the
  // logits f32 [batch_size, vocab] on the device, overwritten by the next Step
  // and ordered on stream(): read them there (kernels::ScopedStream), since
  // the stream does not synchronise with the legacy default stream.
  absl::StatusOr<Tensor> Step(const models::StepInput& input);

 private:
  DecodeGraph(models::Qwen3Model& model, models::KvCache& cache) : model_(model), cache_(cache) {}
  // Views of the device input buffer.
  absl::Status Bind();
  // The same device work Step replays (warm-up and capture).
  absl::Status Record();

  models::Qwen3Model& model_;
  models::KvCache& cache_;
  int64_t batch_size_ = 0, table_width_ = 0;
  CudaStream stream_;
  CudaGraph graph_;
  PinnedBuffer staging_;  // i32: ids, positions, slots, query_start, context_lens, tables
  Tensor inputs_;         // the device copy of staging_
  Tensor ids_, logits_;
  models::CacheBatch step_;
};

}  // namespace seam::runtime
