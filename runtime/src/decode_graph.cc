#include "seam/runtime/decode_graph.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "seam/core/status.h"
#include "seam/kernels/stream.h"

namespace seam::runtime {
namespace {

// Elements of the staging buffer for B sequences and tables W wide.
int64_t StagedInts(int64_t b, int64_t w) { return 5 * b + 1 + b * w; }

}  // namespace

absl::StatusOr<std::unique_ptr<DecodeGraph>> DecodeGraph::Capture(models::Qwen3Model& model, models::KvCache& cache,
                                                                  int64_t batch_size, int64_t max_context) {
  const Device dev = model.options().device;
  if (!dev.is_cuda()) {
    return absl::FailedPreconditionError(absl::StrCat("DecodeGraph needs a model on CUDA; this one is on ",
                                                      dev.ToString()));
  }
  if (cache.options().device != dev) {
    return absl::FailedPreconditionError(absl::StrCat("DecodeGraph: the cache is on ",
                                                      cache.options().device.ToString(), ", the model on ",
                                                      dev.ToString()));
  }
  if (model.options().topology.tp != 1 || model.options().topology.attn_dp != 1 || !model.is_first_piece() ||
      !model.is_last_piece()) {
    return absl::FailedPreconditionError("DecodeGraph serves the whole stack at TP 1 and attention DP 1");
  }
  if (batch_size <= 0 || max_context <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("DecodeGraph: batch size (", batch_size,
                                                   ") and max context (", max_context, ") must be positive"));
  }
  auto g = std::unique_ptr<DecodeGraph>(new DecodeGraph(model, cache));
  g->batch_size_ = batch_size;
  g->table_width_ = (max_context + cache.block_size() - 1) / cache.block_size();
  SEAM_ASSIGN_OR_RETURN(g->stream_, CudaStream::Create(dev));
  const int64_t ints = StagedInts(batch_size, g->table_width_);
  SEAM_ASSIGN_OR_RETURN(g->staging_, PinnedBuffer::Create(ints * sizeof(int32_t)));
  kernels::ScopedStream on(g->stream_.handle());
  SEAM_ASSIGN_OR_RETURN(g->inputs_, Tensor::TryEmpty({ints}, DType::kI32, dev));
  SEAM_ASSIGN_OR_RETURN(g->logits_, Tensor::TryEmpty({batch_size, model.config().vocab_size}, DType::kF32, dev));
  SEAM_RETURN_IF_ERROR(g->Bind());

  // Placeholder inputs for the warm-up and the capture: every token at
  // position 0 of a one-token context in block 0, writing no cache slot.
  int32_t* s = static_cast<int32_t*>(g->staging_.data());
  std::memset(s, 0, ints * sizeof(int32_t));
  const int64_t b = batch_size;
  for (int64_t i = 0; i < b; ++i) {
    s[2 * b + i] = -1;                 // slot: skip
    s[3 * b + i + 1] = int32_t(i + 1);  // query_start
    s[4 * b + 1 + i] = 1;              // context length
  }
  SEAM_RETURN_IF_ERROR(UploadAsync(g->inputs_.raw_data(), dev, s, ints * sizeof(int32_t), g->stream_));
  // The warm-up creates what the first run of each op creates lazily (library
  // handles, pool memory), which a capture must not do.
  SEAM_RETURN_IF_ERROR(g->Record());
  SEAM_RETURN_IF_ERROR(g->stream_.Synchronize());
  SEAM_ASSIGN_OR_RETURN(g->graph_, CudaGraph::Capture(g->stream_, [&g] { return g->Record(); }));
  return g;
}

absl::Status DecodeGraph::Bind() {
  const int64_t b = batch_size_;
  ids_ = inputs_.Rows(0, b);
  step_.positions = inputs_.Rows(b, b);
  step_.slot_mapping = inputs_.Rows(2 * b, b);
  step_.attention.query_start = inputs_.Rows(3 * b, b + 1);
  step_.attention.context_lens = inputs_.Rows(4 * b + 1, b);
  SEAM_ASSIGN_OR_RETURN(step_.attention.block_tables,
                        inputs_.Rows(5 * b + 1, b * table_width_).Reshape({b, table_width_}));
  return absl::OkStatus();
}

absl::Status DecodeGraph::Record() {
  boundary::ForwardBatch batch(0, boundary::BatchVariant::kOrdinary, model_.options().topology, {batch_size_});
  SEAM_ASSIGN_OR_RETURN(Tensor logits, model_.ForwardStep(batch, ids_, step_, cache_));
  return CopyInto(logits, logits_);
}

absl::StatusOr<Tensor> DecodeGraph::Step(const models::StepInput& input) {
  const int64_t b = batch_size_;
  if (static_cast<int64_t>(input.sequences.size()) != b) {
    return absl::InvalidArgumentError(absl::StrCat("this decode graph runs ", b, " sequences; the step has ",
                                                   input.sequences.size()));
  }
  std::vector<models::CacheSpan> spans;
  for (const models::SequenceStep& s : input.sequences) {
    if (s.tokens.size() != 1) {
      return absl::InvalidArgumentError(absl::StrCat("sequence ", s.sequence, " has ", s.tokens.size(),
                                                     " tokens; a decode step runs one per sequence"));
    }
    if (s.tokens[0] < 0 || s.tokens[0] >= model_.config().vocab_size) {
      return absl::InvalidArgumentError(absl::StrCat("sequence ", s.sequence, ": token ", s.tokens[0],
                                                     " is outside the vocabulary of ", model_.config().vocab_size));
    }
    if (s.start < 0 || s.start + 1 > max_context()) {
      return absl::OutOfRangeError(absl::StrCat("sequence ", s.sequence, " reaches position ", s.start,
                                                "; this decode graph holds contexts up to ", max_context()));
    }
    spans.push_back(models::CacheSpan{s.sequence, s.start, 1});
  }
  SEAM_RETURN_IF_ERROR(cache_.Reserve(spans));
  SEAM_ASSIGN_OR_RETURN(models::CacheBatchPlan plan, cache_.PlanBatch(spans, table_width_));

  // The previous step's upload must be done before the staging is rewritten.
  SEAM_RETURN_IF_ERROR(stream_.Synchronize());
  int32_t* s = static_cast<int32_t*>(staging_.data());
  for (int64_t i = 0; i < b; ++i) s[i] = input.sequences[i].tokens[0];
  std::memcpy(s + b, plan.positions.data(), b * sizeof(int32_t));
  std::memcpy(s + 2 * b, plan.slot_mapping.data(), b * sizeof(int32_t));
  std::memcpy(s + 3 * b, plan.query_start.data(), (b + 1) * sizeof(int32_t));
  std::memcpy(s + 4 * b + 1, plan.context_lens.data(), b * sizeof(int32_t));
  std::memcpy(s + 5 * b + 1, plan.block_tables.data(), plan.block_tables.size() * sizeof(int32_t));
  SEAM_RETURN_IF_ERROR(UploadAsync(inputs_.raw_data(), inputs_.device(), s, inputs_.nbytes(), stream_));
  SEAM_RETURN_IF_ERROR(graph_.Launch(stream_));
  return logits_;
}

}  // namespace seam::runtime
