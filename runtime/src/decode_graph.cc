#include "seam/runtime/decode_graph.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "seam/core/device_memory.h"
#include "seam/core/status.h"
#include "seam/kernels/stream.h"

namespace seam::runtime {
namespace {

// Where each input sits in the staging buffer (and its device copy) of a
// graph of R rows and B sequences with tables W wide: ids, positions and KV
// slots (R each), query starts (B + 1), context lengths, block tables (B x
// W), the Mamba state slots (-1 where a model keeps no state), then a mixed
// graph's last rows (B).
struct Staged {
  int64_t r, b, w;
  bool mixed;
  int64_t positions() const { return r; }
  int64_t slots() const { return 2 * r; }
  int64_t query_start() const { return 3 * r; }
  int64_t context_lens() const { return 3 * r + b + 1; }
  int64_t tables() const { return 3 * r + 2 * b + 1; }
  int64_t state_slots() const { return tables() + b * w; }
  int64_t last_rows() const { return state_slots() + b; }
  int64_t ints() const { return last_rows() + (mixed ? b : 0); }
};

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
  if (options.rows != 0 && options.rows <= options.batch_size) {
    return absl::InvalidArgumentError(absl::StrCat("DecodeGraph: a mixed graph's rows (", options.rows,
                                                   ") must be more than its batch size (", options.batch_size, ")"));
  }
  if (options.rows != 0 && (cache.states() != nullptr || cache.is_latent())) {
    return absl::FailedPreconditionError(absl::StrCat(
        "DecodeGraph: mixed graphs take a key/value cache; this one ",
        cache.is_latent() ? "is latent" : "keeps Mamba state", ", whose kernels take no empty sequence"));
  }
  const int64_t step_rows = std::max(options.batch_size, options.rows) * topology.attn_dp;
  if (step_rows > model.graph_max_rows()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "DecodeGraph: a step of ", std::max(options.batch_size, options.rows), " rows per DP group (", step_rows,
        " token rows) is more than this piece records (", model.graph_max_rows(),
        " rows: its MoE layers group their experts on the device up to that, or not at all at 0)"));
  }
  return absl::OkStatus();
}

// The staged padding of a zeroed buffer after `n` real sequences holding
// `rows` real rows (the warm-up and the capture: none). A decode graph:
// each padding row is token 0 at position 0 of a one-token context in block
// 0. A mixed graph: the padding sequences are empty, with no context, and
// the last of them takes every padding row (token 0 at position 0). No
// padding row writes a cache slot or a state.
void StagePadding(int32_t* s, const Staged& l, int64_t n, int64_t rows) {
  for (int64_t i = rows; i < l.r; ++i) s[l.slots() + i] = -1;
  for (int64_t i = n; i < l.b; ++i) {
    s[l.state_slots() + i] = -1;
    if (l.mixed) {
      s[l.query_start() + i + 1] = int32_t(i + 1 == l.b ? l.r : rows);
    } else {
      s[l.query_start() + i + 1] = int32_t(i + 1);
      s[l.context_lens() + i] = 1;
    }
  }
}

}  // namespace

absl::Status DecodeGraph::Allocate(const DecodeGraphOptions& options) {
  const Device dev = model_.options().device;
  const boundary::Topology& topology = model_.options().topology;
  const int64_t b = options.batch_size;
  groups_ = options.groups;
  batch_size_ = b;
  rows_ = options.rows == 0 ? b : options.rows;
  table_width_ = (options.max_context + cache_.block_size() - 1) / cache_.block_size();
  dp_rows_.assign(topology.attn_dp, rows_);
  if (options.stream != nullptr) {
    stream_ = options.stream;
  } else {
    SEAM_ASSIGN_OR_RETURN(owned_stream_, CudaStream::Create(dev));
    stream_ = &owned_stream_;
  }
  const int64_t ints = Staged{rows_, batch_size_, table_width_, mixed()}.ints();
  for (int i = 0; i < 2; ++i) {
    SEAM_ASSIGN_OR_RETURN(staging_[i], PinnedBuffer::Create(ints * sizeof(int32_t)));
    SEAM_ASSIGN_OR_RETURN(staged_[i], CudaEvent::Create(dev));
  }
  kernels::ScopedStream on(stream_->handle());
  SEAM_ASSIGN_OR_RETURN(inputs_, Tensor::TryEmpty({ints}, DType::kI32, dev));
  const int64_t vocab = model_.config().vocab_size;
  const Tensor& shared = options.logits_buffer;
  if (model_.is_last_piece() && shared.defined()) {
    if (shared.dtype() != DType::kF32 || shared.rank() != 2 || shared.dim(0) < b || shared.dim(1) != vocab ||
        shared.device() != dev) {
      return absl::InvalidArgumentError(absl::StrCat("DecodeGraph: the shared logits buffer is ",
                                                     shared.DebugString(), "; expected f32 [>= ", b, ", ", vocab,
                                                     "] on ", dev.ToString()));
    }
    logits_ = shared.Rows(0, b);
  } else if (model_.is_last_piece()) {
    SEAM_ASSIGN_OR_RETURN(logits_, Tensor::TryEmpty({b, vocab}, DType::kF32, dev));
  }
  owns_logits_ = !shared.defined();
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
  const Staged l{g->rows_, g->batch_size_, g->table_width_, g->mixed()};
  const int64_t ints = l.ints();
  int32_t* s = static_cast<int32_t*>(g->staging_[0].data());
  std::memset(s, 0, ints * sizeof(int32_t));
  StagePadding(s, l, 0, 0);
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
  return Bytes(inputs_) + (owns_logits_ ? Bytes(logits_) : 0) + Bytes(in_.hidden) + Bytes(in_.residual) + Bytes(out_.hidden) +
         Bytes(out_.residual) + static_cast<int64_t>(staging_[0].bytes() + staging_[1].bytes());
}

absl::Status DecodeGraph::Bind() {
  const Staged l{rows_, batch_size_, table_width_, mixed()};
  ids_ = inputs_.Rows(0, l.r);
  step_.positions = inputs_.Rows(l.positions(), l.r);
  step_.slot_mapping = inputs_.Rows(l.slots(), l.r);
  step_.attention.query_start = inputs_.Rows(l.query_start(), l.b + 1);
  step_.attention.context_lens = inputs_.Rows(l.context_lens(), l.b);
  SEAM_ASSIGN_OR_RETURN(step_.attention.block_tables,
                        inputs_.Rows(l.tables(), l.b * l.w).Reshape({l.b, l.w}));
  step_.state_slots = inputs_.Rows(l.state_slots(), l.b);
  if (l.mixed) last_rows_ = inputs_.Rows(l.last_rows(), l.b);
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
                                                               last_rows_, last ? nullptr : &out));
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
  const int64_t n = static_cast<int64_t>(input.sequences.size());
  int64_t rows = 0;
  for (const models::SequenceStep& s : input.sequences) {
    const int64_t t = static_cast<int64_t>(s.tokens.size());
    if (t < 1 || (!mixed() && t != 1) || s.start < 0 || s.start + t > max_context()) return false;
    rows += t;
  }
  // A mixed graph's padding rows need a padding sequence.
  return n <= batch_size_ && rows <= rows_ && (rows == rows_ || n < batch_size_ || !mixed());
}

absl::StatusOr<std::vector<models::CacheSpan>> DecodeGraph::CheckReplay(const models::StepInput& input,
                                                                        const boundary::PipelineTensors* in,
                                                                        const Tensor* fed_ids) const {
  const int64_t n = static_cast<int64_t>(input.sequences.size());
  const weights::ModelConfig& config = model_.config();
  const bool first = model_.is_first_piece();
  if (n > batch_size_) {
    return absl::InvalidArgumentError(
        absl::StrCat("this graph runs up to ", batch_size_, " sequences; the step has ", n));
  }
  std::vector<models::CacheSpan> spans;
  int64_t rows = 0;
  for (const models::SequenceStep& s : input.sequences) {
    const int64_t t = static_cast<int64_t>(s.tokens.size());
    if (t < 1 || (!mixed() && t != 1)) {
      return absl::InvalidArgumentError(absl::StrCat("sequence ", s.sequence, " has ", t, " tokens; a ",
                                                     mixed() ? "step runs at least one" : "decode step runs one",
                                                     " per sequence"));
    }
    for (int32_t token : s.tokens) {
      if (first && fed_ids == nullptr && (token < 0 || token >= config.vocab_size)) {
        return absl::InvalidArgumentError(absl::StrCat("sequence ", s.sequence, ": token ", token,
                                                       " is outside the vocabulary of ", config.vocab_size));
      }
    }
    if (s.start < 0 || s.start + t > max_context()) {
      return absl::OutOfRangeError(absl::StrCat("sequence ", s.sequence, " reaches position ", s.start + t - 1,
                                                "; this graph holds contexts up to ", max_context()));
    }
    spans.push_back(models::CacheSpan{s.sequence, s.start, t});
    rows += t;
  }
  if (rows > rows_ || (mixed() && rows < rows_ && n == batch_size_)) {
    return absl::InvalidArgumentError(absl::StrCat("this mixed graph runs up to ", rows_, " rows of ", batch_size_,
                                                   " sequences (fewer sequences when the rows fall short); the "
                                                   "step has ", rows, " rows of ", n));
  }
  if (fed_ids != nullptr && mixed()) {
    return absl::InvalidArgumentError("a mixed graph takes no fed token ids");
  }
  if (fed_ids != nullptr && (!first || !fed_ids->defined() || fed_ids->dtype() != DType::kI32 ||
                             fed_ids->shape() != Shape{n} || fed_ids->device() != inputs_.device())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "fed token ids must be i32 [", n, "] on ", inputs_.device().ToString(), " for a first piece; got ",
        fed_ids->defined() ? fed_ids->DebugString() : "none", first ? "" : " on a later piece"));
  }
  if (!first) SEAM_RETURN_IF_ERROR(CheckHandoffIn(in, rows));
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
  const Staged l{rows_, batch_size_, table_width_, mixed()};
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
  std::memset(s, 0, l.ints() * sizeof(int32_t));
  int64_t rows = 0;
  for (const models::SequenceStep& seq : input.sequences) {
    for (int32_t token : seq.tokens) s[rows++] = token;
  }
  std::memcpy(s + l.positions(), plan.positions.data(), rows * sizeof(int32_t));
  std::memcpy(s + l.slots(), plan.slot_mapping.data(), rows * sizeof(int32_t));
  std::memcpy(s + l.query_start(), plan.query_start.data(), (n + 1) * sizeof(int32_t));
  std::memcpy(s + l.context_lens(), plan.context_lens.data(), n * sizeof(int32_t));
  std::memcpy(s + l.tables(), plan.block_tables.data(), plan.block_tables.size() * sizeof(int32_t));
  std::memcpy(s + l.state_slots(), plan.state_slots.data(), n * sizeof(int32_t));
  if (l.mixed) {
    for (int64_t i = 0; i < n; ++i) s[l.last_rows() + i] = plan.query_start[i + 1] - 1;
  }
  StagePadding(s, l, n, rows);  // padding rows, as in the capture
  if (!first) {  // real rows first, zero padding rows (the step updates the residual in place)
    for (const auto& [from, to] : {std::pair{&in->hidden, &in_.hidden}, std::pair{&in->residual, &in_.residual}}) {
      if (!to->defined()) continue;
      if (rows > 0) SEAM_RETURN_IF_ERROR(CopyInto(*from, to->Rows(0, rows)));
      SEAM_RETURN_IF_ERROR(ZeroRowsFrom(*to, rows));
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
    out.handoff.hidden = out_.hidden.Rows(0, rows);
    if (out_.residual.defined()) out.handoff.residual = out_.residual.Rows(0, rows);
  }
  return out;
}

absl::StatusOr<Tensor> DecodeGraph::Step(const models::StepInput& input) {
  SEAM_ASSIGN_OR_RETURN(DecodeGraphOutput out, Replay(input, nullptr));
  if (!out.logits.defined()) return absl::FailedPreconditionError("Step returns logits: this graph is not the last piece");
  return out.logits;
}

}  // namespace seam::runtime
