#include "seam/runtime/decode_graph.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "seam/core/device_memory.h"
#include "seam/core/status.h"
#include "seam/kernels/stream.h"

namespace seam::runtime {
namespace {

// Elements of the staging buffer for B sequences and tables W wide: ids,
// positions, KV slots, query starts (B + 1), context lengths, block tables,
// then the Mamba state slots (-1 where a model keeps no state).
int64_t StagedInts(int64_t b, int64_t w) { return 6 * b + 1 + b * w; }
int64_t StateSlotsAt(int64_t b, int64_t w) { return 5 * b + 1 + b * w; }

// Whether a handoff in `form` holds the DP group's rows in order (real rows first).
bool RowsInOrder(boundary::RowForm form, const boundary::Topology& topology) {
  return form == boundary::RowForm::kDpRows ||
         (form == boundary::RowForm::kAttnTpSlice && topology.attn_tp() == 1);
}

int64_t Bytes(const Tensor& t) { return t.defined() ? t.nbytes() : 0; }

// Zeroes rows [from, end) of a fixed device buffer (padding rows of a handoff).
absl::Status ZeroRowsFrom(const Tensor& t, int64_t from) {
  if (!t.defined() || from >= t.rows()) return absl::OkStatus();
  Tensor tail = t.Rows(from, t.rows() - from);
  return DeviceMemset(t.device(), tail.raw_data(), 0, tail.nbytes());
}

}  // namespace

absl::StatusOr<std::unique_ptr<DecodeGraph>> DecodeGraph::Capture(models::DecoderModel& model, models::KvCache& cache,
                                                                  int64_t batch_size, int64_t max_context) {
  if (!model.is_first_piece() || !model.is_last_piece()) {
    return absl::FailedPreconditionError("this DecodeGraph::Capture serves the whole stack; pass options for a piece");
  }
  DecodeGraphOptions options;
  options.batch_size = batch_size;
  options.max_context = max_context;
  return Capture(model, cache, options);
}

namespace {

// What a capture refuses before it allocates anything.
absl::Status CheckCapture(const models::DecoderModel& model, const models::KvCache& cache,
                          const DecodeGraphOptions& options) {
  const Device dev = model.options().device;
  const boundary::Topology& topology = model.options().topology;
  if (!dev.is_cuda()) {
    return absl::FailedPreconditionError(absl::StrCat("DecodeGraph needs a model on CUDA; this one is on ",
                                                      dev.ToString()));
  }
  if (cache.options().device != dev) {
    return absl::FailedPreconditionError(absl::StrCat("DecodeGraph: the cache is on ",
                                                      cache.options().device.ToString(), ", the model on ",
                                                      dev.ToString()));
  }
  if (options.groups == nullptr && (topology.tp != 1 || topology.attn_dp != 1)) {
    return absl::FailedPreconditionError(absl::StrCat("DecodeGraph: a rank of TP ", topology.tp, " (attention DP ",
                                                      topology.attn_dp, ") needs its process groups"));
  }
  if (!model.is_first_piece() && !RowsInOrder(options.in_rows, topology)) {
    return absl::FailedPreconditionError(absl::StrCat("DecodeGraph: a handoff on ",
                                                      boundary::RowFormName(options.in_rows),
                                                      " does not hold the DP group's rows in order"));
  }
  if (options.batch_size <= 0 || options.max_context <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("DecodeGraph: batch size (", options.batch_size,
                                                   ") and max context (", options.max_context,
                                                   ") must be positive"));
  }
  const int64_t step_rows = options.batch_size * topology.attn_dp;
  if (step_rows > model.graph_max_rows()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "DecodeGraph: a step of ", options.batch_size, " sequences per DP group (", step_rows,
        " token rows) is more than this piece records (", model.graph_max_rows(),
        " rows: its MoE layers group their experts on the device up to that, or not at all at 0)"));
  }
  return absl::OkStatus();
}

// The staged inputs of `b` padding rows (and of the warm-up and the capture
// from row `from` on): token 0 at position 0 of a one-token context in
// block 0, writing no cache slot and no state.
void StagePadding(int32_t* s, int64_t b, int64_t table_width, int64_t from) {
  for (int64_t i = from; i < b; ++i) {
    s[2 * b + i] = -1;                  // slot: skip
    s[3 * b + i + 1] = int32_t(i + 1);  // query_start
    s[4 * b + 1 + i] = 1;               // context length
    s[StateSlotsAt(b, table_width) + i] = -1;  // Mamba state: none
  }
}

}  // namespace

absl::Status DecodeGraph::Allocate(const DecodeGraphOptions& options) {
  const Device dev = model_.options().device;
  const boundary::Topology& topology = model_.options().topology;
  const int64_t b = options.batch_size;
  groups_ = options.groups;
  batch_size_ = b;
  table_width_ = (options.max_context + cache_.block_size() - 1) / cache_.block_size();
  dp_rows_.assign(topology.attn_dp, b);
  if (options.stream != nullptr) {
    stream_ = options.stream;
  } else {
    SEAM_ASSIGN_OR_RETURN(owned_stream_, CudaStream::Create(dev));
    stream_ = &owned_stream_;
  }
  const int64_t ints = StagedInts(b, table_width_);
  for (int i = 0; i < 2; ++i) {
    SEAM_ASSIGN_OR_RETURN(staging_[i], PinnedBuffer::Create(ints * sizeof(int32_t)));
    SEAM_ASSIGN_OR_RETURN(staged_[i], CudaEvent::Create(dev));
  }
  kernels::ScopedStream on(stream_->handle());
  SEAM_ASSIGN_OR_RETURN(inputs_, Tensor::TryEmpty({ints}, DType::kI32, dev));
  if (model_.is_last_piece()) {
    SEAM_ASSIGN_OR_RETURN(logits_, Tensor::TryEmpty({b, model_.config().vocab_size}, DType::kF32, dev));
  }
  if (!model_.is_first_piece()) {
    const boundary::BatchRows rows(topology, dp_rows_, /*padded=*/true);
    const Shape shape{rows.RowsOf(options.in_rows), model_.config().hidden_size};
    in_.state = options.in_state;
    in_.rows = options.in_rows;
    SEAM_ASSIGN_OR_RETURN(in_.hidden, Tensor::TryEmpty(shape, model_.options().dtype, dev));
    SEAM_RETURN_IF_ERROR(ZeroRowsFrom(in_.hidden, 0));
    if (options.in_state == boundary::StreamState::kPending) {
      SEAM_ASSIGN_OR_RETURN(in_.residual, Tensor::TryEmpty(shape, model_.options().dtype, dev));
      SEAM_RETURN_IF_ERROR(ZeroRowsFrom(in_.residual, 0));
    }
  }
  return Bind();
}

absl::StatusOr<std::unique_ptr<DecodeGraph>> DecodeGraph::Capture(models::DecoderModel& model, models::KvCache& cache,
                                                                  const DecodeGraphOptions& options) {
  SEAM_RETURN_IF_ERROR(CheckCapture(model, cache, options));
  auto g = std::unique_ptr<DecodeGraph>(new DecodeGraph(model, cache));
  SEAM_RETURN_IF_ERROR(g->Allocate(options));
  kernels::ScopedStream on(g->stream_->handle());
  // Placeholder inputs for the warm-up and the capture: padding rows only.
  const int64_t b = g->batch_size_, ints = StagedInts(b, g->table_width_);
  int32_t* s = static_cast<int32_t*>(g->staging_[0].data());
  std::memset(s, 0, ints * sizeof(int32_t));
  StagePadding(s, b, g->table_width_, 0);
  SEAM_RETURN_IF_ERROR(UploadAsync(g->inputs_.raw_data(), g->inputs_.device(), s, ints * sizeof(int32_t),
                                   *g->stream_));
  // The warm-up creates what the first run of each op creates lazily (library
  // handles, plans, pool memory, NCCL scratch and connections), which a
  // capture must not do; it also learns the handoff this piece leaves.
  SEAM_RETURN_IF_ERROR(g->Record(/*capturing=*/false));
  if (g->groups_ != nullptr) {
    SEAM_RETURN_IF_ERROR(g->groups_->Synchronize(absl::Now() + options.comm_timeout));
  }
  SEAM_RETURN_IF_ERROR(g->stream_->Synchronize());
  SEAM_ASSIGN_OR_RETURN(g->graph_, CudaGraph::Capture(*g->stream_, [&g] { return g->Record(/*capturing=*/true); }));
  return g;
}

int64_t DecodeGraph::buffer_bytes() const {
  return Bytes(inputs_) + Bytes(logits_) + Bytes(in_.hidden) + Bytes(in_.residual) + Bytes(out_.hidden) +
         Bytes(out_.residual) + static_cast<int64_t>(staging_[0].bytes() + staging_[1].bytes());
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
  step_.state_slots = inputs_.Rows(StateSlotsAt(b, table_width_), b);
  return absl::OkStatus();
}

absl::Status DecodeGraph::Record(bool capturing) {
  boundary::ForwardBatch batch(0, boundary::BatchVariant::kOrdinary, model_.options().topology, dp_rows_);
  if (groups_ != nullptr) {
    batch.comms = boundary::StageComms{&groups_->tp(), &groups_->attn_tp(), &groups_->attn_dp()};
  }
  const bool first = model_.is_first_piece(), last = model_.is_last_piece();
  boundary::PipelineTensors out;
  SEAM_ASSIGN_OR_RETURN(Tensor logits, model_.ForwardPieceStep(batch, ids_, first ? nullptr : &in_, step_, cache_,
                                                               Tensor(), last ? nullptr : &out));
  // Only attention-TP rank 0 of a DP group computes logits (the model's contract).
  if (last) return logits.defined() ? CopyInto(logits, logits_) : absl::OkStatus();
  if (!capturing) {  // the warm-up: fixed buffers for the handoff this piece leaves
    if (!RowsInOrder(out.rows, model_.options().topology)) {
      return absl::UnimplementedError(absl::StrCat("DecodeGraph: this piece's handoff leaves on ",
                                                        boundary::RowFormName(out.rows),
                                                        ", which does not hold the DP group's rows in order"));
    }
    out_.state = out.state;
    out_.rows = out.rows;
    SEAM_ASSIGN_OR_RETURN(out_.hidden, Tensor::TryEmpty(out.hidden.shape(), out.hidden.dtype(), out.hidden.device()));
    if (out.residual.defined()) {
      SEAM_ASSIGN_OR_RETURN(out_.residual,
                            Tensor::TryEmpty(out.residual.shape(), out.residual.dtype(), out.residual.device()));
    }
  } else if (out.state != out_.state || out.rows != out_.rows || out.residual.defined() != out_.residual.defined()) {
    return absl::InternalError("DecodeGraph: the captured step leaves another handoff than its warm-up");
  }
  SEAM_RETURN_IF_ERROR(CopyInto(out.hidden, out_.hidden));
  if (out.residual.defined()) SEAM_RETURN_IF_ERROR(CopyInto(out.residual, out_.residual));
  return absl::OkStatus();
}

bool DecodeGraph::Fits(const models::StepInput& input) const {
  if (static_cast<int64_t>(input.sequences.size()) > batch_size_) return false;
  for (const models::SequenceStep& s : input.sequences) {
    if (s.tokens.size() != 1 || s.start < 0 || s.start + 1 > max_context()) return false;
  }
  return true;
}

absl::StatusOr<std::vector<models::CacheSpan>> DecodeGraph::CheckReplay(const models::StepInput& input,
                                                                        const boundary::PipelineTensors* in,
                                                                        const Tensor* fed_ids) const {
  const int64_t n = static_cast<int64_t>(input.sequences.size());
  const weights::ModelConfig& config = model_.config();
  const bool first = model_.is_first_piece();
  if (n > batch_size_) {
    return absl::InvalidArgumentError(
        absl::StrCat("this decode graph runs up to ", batch_size_, " sequences; the step has ", n));
  }
  std::vector<models::CacheSpan> spans;
  for (const models::SequenceStep& s : input.sequences) {
    if (s.tokens.size() != 1) {
      return absl::InvalidArgumentError(absl::StrCat("sequence ", s.sequence, " has ", s.tokens.size(),
                                                     " tokens; a decode step runs one per sequence"));
    }
    if (first && fed_ids == nullptr && (s.tokens[0] < 0 || s.tokens[0] >= config.vocab_size)) {
      return absl::InvalidArgumentError(absl::StrCat("sequence ", s.sequence, ": token ", s.tokens[0],
                                                     " is outside the vocabulary of ", config.vocab_size));
    }
    if (s.start < 0 || s.start + 1 > max_context()) {
      return absl::OutOfRangeError(absl::StrCat("sequence ", s.sequence, " reaches position ", s.start,
                                                "; this decode graph holds contexts up to ", max_context()));
    }
    spans.push_back(models::CacheSpan{s.sequence, s.start, 1});
  }
  if (fed_ids != nullptr && (!first || !fed_ids->defined() || fed_ids->dtype() != DType::kI32 ||
                             fed_ids->shape() != Shape{n} || fed_ids->device() != inputs_.device())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "fed token ids must be i32 [", n, "] on ", inputs_.device().ToString(), " for a first piece; got ",
        fed_ids->defined() ? fed_ids->DebugString() : "none", first ? "" : " on a later piece"));
  }
  if (!first) SEAM_RETURN_IF_ERROR(CheckHandoffIn(in, n));
  return spans;
}

absl::Status DecodeGraph::CheckHandoffIn(const boundary::PipelineTensors* in, int64_t n) const {
  if (in == nullptr) {
    return absl::InvalidArgumentError("a pipeline piece after the first needs the previous piece's handoff");
  }
  if (in->state != in_.state || in->rows != in_.rows) {
    return absl::InvalidArgumentError(absl::StrCat(
        "this decode graph takes a ", boundary::StreamStateName(in_.state), " handoff on ",
        boundary::RowFormName(in_.rows), "; got a ", boundary::StreamStateName(in->state), " one on ",
        boundary::RowFormName(in->rows)));
  }
  const int64_t hidden = model_.config().hidden_size;
  for (const Tensor* t : {&in->hidden, &in->residual}) {
    if (t == &in->residual && in_.state != boundary::StreamState::kPending) continue;
    if (!t->defined() || t->shape() != Shape{n, hidden} || t->dtype() != in_.hidden.dtype()) {
      return absl::InvalidArgumentError(absl::StrCat("a handoff tensor is ", t->defined() ? t->DebugString() : "missing",
                                                     "; expected ", DTypeName(in_.hidden.dtype()), " [", n, ", ",
                                                     hidden, "]"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<DecodeGraphOutput> DecodeGraph::Replay(const models::StepInput& input,
                                                      const boundary::PipelineTensors* in, const Tensor* fed_ids) {
  const int64_t b = batch_size_;
  const int64_t n = static_cast<int64_t>(input.sequences.size());
  const bool first = model_.is_first_piece(), last = model_.is_last_piece();
  SEAM_ASSIGN_OR_RETURN(const std::vector<models::CacheSpan> spans, CheckReplay(input, in, fed_ids));
  SEAM_RETURN_IF_ERROR(cache_.Reserve(spans));
  SEAM_ASSIGN_OR_RETURN(models::CacheBatchPlan plan, cache_.PlanBatch(spans, table_width_));

  kernels::ScopedStream on(stream_->handle());
  // The staging buffer's last upload must have left it before it is
  // rewritten; the fixed device inputs are rewritten in stream order.
  const int j = next_staging_;
  next_staging_ = 1 - j;
  SEAM_RETURN_IF_ERROR(staged_[j].Wait(absl::Now() + absl::Minutes(5)));
  int32_t* s = static_cast<int32_t*>(staging_[j].data());
  std::memset(s, 0, StagedInts(b, table_width_) * sizeof(int32_t));
  for (int64_t i = 0; i < n; ++i) s[i] = input.sequences[i].tokens[0];
  std::memcpy(s + b, plan.positions.data(), n * sizeof(int32_t));
  std::memcpy(s + 2 * b, plan.slot_mapping.data(), n * sizeof(int32_t));
  std::memcpy(s + 3 * b, plan.query_start.data(), (n + 1) * sizeof(int32_t));
  std::memcpy(s + 4 * b + 1, plan.context_lens.data(), n * sizeof(int32_t));
  std::memcpy(s + 5 * b + 1, plan.block_tables.data(), plan.block_tables.size() * sizeof(int32_t));
  std::memcpy(s + StateSlotsAt(b, table_width_), plan.state_slots.data(), n * sizeof(int32_t));
  StagePadding(s, b, table_width_, n);  // padding rows, as in the capture
  if (!first) {  // real rows first, zero padding rows (the step updates the residual in place)
    for (const auto& [from, to] : {std::pair{&in->hidden, &in_.hidden}, std::pair{&in->residual, &in_.residual}}) {
      if (!to->defined()) continue;
      if (n > 0) SEAM_RETURN_IF_ERROR(CopyInto(*from, to->Rows(0, n)));
      SEAM_RETURN_IF_ERROR(ZeroRowsFrom(*to, n));
    }
  }
  SEAM_RETURN_IF_ERROR(UploadAsync(inputs_.raw_data(), inputs_.device(), s, inputs_.nbytes(), *stream_));
  SEAM_RETURN_IF_ERROR(staged_[j].Record(*stream_));
  if (fed_ids != nullptr && n > 0) SEAM_RETURN_IF_ERROR(CopyInto(*fed_ids, ids_.Rows(0, n)));
  SEAM_RETURN_IF_ERROR(graph_.Launch(*stream_));
  DecodeGraphOutput out;
  if (last) {
    if (model_.options().topology.attn_tp_rank() == 0) out.logits = logits_.Rows(0, n);
  } else {
    out.handoff = out_;
    out.handoff.hidden = out_.hidden.Rows(0, n);
    if (out_.residual.defined()) out.handoff.residual = out_.residual.Rows(0, n);
  }
  return out;
}

absl::StatusOr<Tensor> DecodeGraph::Step(const models::StepInput& input) {
  SEAM_ASSIGN_OR_RETURN(DecodeGraphOutput out, Replay(input, nullptr));
  if (!out.logits.defined()) return absl::FailedPreconditionError("Step returns logits: this graph is not the last piece");
  return out.logits;
}

}  // namespace seam::runtime
