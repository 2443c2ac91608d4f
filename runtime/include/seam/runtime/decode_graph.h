// DecodeGraph: one step of one rank's pipeline piece (the whole stack or a
// layer range, TP 1 or one rank of a TP group) recorded once as a CUDA
// graph and replayed, so a step costs one upload and one graph launch instead
// of hundreds of kernel launches. Two shapes:
//
//  * a decode graph (options.rows 0): up to `batch_size` sequences of one
//    token each per attention-DP group (its bucket), padded up to it: a
//    padding row is token 0 at position 0 of a one-token context whose KV
//    slot is -1 (written nowhere), with a zero handoff row; its outputs are
//    dropped.
//  * a mixed graph (options.rows > batch_size): up to `rows` token rows of
//    up to `batch_size` sequences per DP group, each with any number of
//    tokens (prefill chunks beside decode rows); the logits (last piece) are
//    each sequence's last row's. It pads the sequences with empty ones (no
//    rows, no context) and gives the padding rows to the last of them as a
//    context-free chunk (KV slots -1, positions 0: the attention sees no key
//    for them and writes zeros), so a step whose rows fall short of `rows`
//    needs fewer than `batch_size` sequences. The attention kernels size
//    their grids from shapes alone (kernels::PagedAttention), so the
//    recorded launches serve any split of the rows into sequences.
//
// Block tables are
// `max_context / block_size` wide (rounded up). The inputs (token ids,
// positions, slots, query starts, context lengths, block tables) are staged
// in a pinned host buffer (two, used in turn, so that the next step's inputs
// are written while this one's upload may still be queued) and uploaded with
// one copy into fixed device buffers the graph reads; a non-first piece's handoff is copied into fixed
// device buffers; the logits (last piece) or the handoff (other pieces) land
// in fixed device buffers. The cache bookkeeping (reserving blocks) stays on
// the host, as in an eager step.
//
// In a TP group every rank captures its own graph, on its own stream, with
// the collectives (NCCL, the IPC all-reduce fusion) inside: all ranks must
// capture the same buckets in the same order and replay them alike. The
// rank's NCCL communicators must enqueue on the graph's stream. Capture and
// replay never call Synchronize on the groups inside the capture; the caller
// synchronises the groups after Replay, before reading outputs on the host.
// Owned and used by one rank thread.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "seam/boundary/pipeline_handoff.h"
#include "seam/comm/process_groups.h"
#include "seam/core/cuda_graph.h"
#include "seam/core/tensor.h"
#include "seam/models/kv_cache.h"
#include "seam/models/decoder_model.h"

namespace seam::runtime {

struct DecodeGraphOptions {
  int64_t batch_size = 1;   // the bucket: sequences of every attention-DP group
  // 0: a decode graph (one row per sequence). Otherwise a mixed graph of
  // this many token rows per DP group, more than batch_size.
  int64_t rows = 0;
  int64_t max_context = 0;  // the longest context a sequence may reach (sets the block tables' width)
  // The rank's groups (their collectives are captured); null: a model of TP 1
  // and attention DP 1 with no communicators.
  comm::ProcessGroups* groups = nullptr;
  // Borrowed: the stream to capture and replay on (the rank's stream, which
  // its NCCL communicators use too); null: the graph owns a stream.
  const CudaStream* stream = nullptr;
  // A non-first piece: the state and row form of the handoff it takes. The
  // form must hold the DP group's rows in order (kDpRows, or attention-TP
  // slices at attention TP 1), so that real rows come first.
  boundary::StreamState in_state = boundary::StreamState::kPending;
  boundary::RowForm in_rows = boundary::RowForm::kDpRows;
  // Bounds the warm-up's Synchronize of the groups.
  absl::Duration comm_timeout = absl::Seconds(30);
  // A last piece's logits land here (f32 [at least batch_size, vocab] on
  // the model's device), shared by graphs that never replay at once (one
  // rank's): a replay's logits then last until any of them replays.
  // Undefined: the graph holds its own.
  Tensor logits_buffer;
};

// The outputs of one replay, views of the graph's fixed device buffers (rows
// of the step's real sequences only), overwritten by the next replay and
// ordered on the graph's stream.
struct DecodeGraphOutput {
  Tensor logits;                      // last piece: f32 [sequences, vocab]
  boundary::PipelineTensors handoff;  // other pieces: this rank's handoff rows
};

class DecodeGraph {
 public:
  // Warms the model up once on the stream (so that what the first run of each
  // op creates lazily, such as library handles, plans, NCCL scratch and
  // connections, exists before the capture), then captures a step. On a TP
  // group every rank calls it at the same point. FAILED_PRECONDITION unless
  // the model and cache are on one CUDA device, or when the piece has sparse
  // (MoE) layers, whose routing reads the routed ids on the host; TP > 1 or
  // attention DP > 1 needs `groups`; a mixed graph needs a cache without
  // Mamba state and not latent (their kernels take no empty sequence).
  // INVALID_ARGUMENT for sizes that are not positive, or a mixed graph's
  // rows not above its batch_size. UNIMPLEMENTED (after the warm-up, on every rank alike) when the
  // piece's handoff leaves on rows out of DP order (attention-TP slices).
  static absl::StatusOr<std::unique_ptr<DecodeGraph>> Capture(models::DecoderModel& model, models::KvCache& cache,
                                                              const DecodeGraphOptions& options);
  // The whole stack at TP 1 on a stream of its own.
  static absl::StatusOr<std::unique_ptr<DecodeGraph>> Capture(models::DecoderModel& model, models::KvCache& cache,
                                                              int64_t batch_size, int64_t max_context);

  int64_t batch_size() const { return batch_size_; }
  // Token rows per DP group: batch_size() for a decode graph.
  int64_t rows() const { return rows_; }
  bool mixed() const { return rows_ > batch_size_; }
  int64_t max_context() const { return table_width_ * cache_.block_size(); }
  // Bytes of the fixed buffers (inputs, handoffs, outputs) this graph holds
  // (a shared logits buffer not counted).
  int64_t buffer_bytes() const;
  // The stream the graph runs on; its outputs are ordered on it.
  const CudaStream& stream() const { return *stream_; }

  // Whether a step of this rank's DP group fits: a decode graph takes at
  // most batch_size sequences of one token each; a mixed graph at most
  // `rows` token rows of at most batch_size sequences (fewer when the rows
  // fall short: the padding rows need a sequence of their own); every
  // sequence within max_context.
  bool Fits(const models::StepInput& input) const;

  // One step of this rank's DP group, fitting as Fits says, whose
  // sequences' earlier tokens are in the cache (INVALID_ARGUMENT
  // otherwise), reserving the blocks they need (RESOURCE_EXHAUSTED when the
  // cache is full, OUT_OF_RANGE past max_context, before anything is
  // reserved). `in`: a non-first piece's handoff on this rank's real rows, in
  // the state the graph was captured for (host or device; required there,
  // ignored on the first piece). `fed_ids` (first piece; may be null): i32
  // [sequences] on this rank's device, the token ids the step feeds in place
  // of input's (which are then not read), copied on the stream, so that a
  // step may take the tokens an earlier replay chose without their passing
  // through the host. Asynchronous: never waits for earlier replays; the
  // caller synchronises the groups (or the stream) before reading outputs.
  absl::StatusOr<DecodeGraphOutput> Replay(const models::StepInput& input, const boundary::PipelineTensors* in,
                                           const Tensor* fed_ids = nullptr);
  // Replay of the whole stack: logits f32 [sequences, vocab] on the device
  // (each sequence's last row's),
  // ordered on stream(): read them there (kernels::ScopedStream), since the
  // stream does not synchronise with the legacy default stream.
  absl::StatusOr<Tensor> Step(const models::StepInput& input);

 private:
  DecodeGraph(models::DecoderModel& model, models::KvCache& cache) : model_(model), cache_(cache) {}
  // The fixed buffers, stream and staging of `options` (Capture's first half).
  absl::Status Allocate(const DecodeGraphOptions& options);
  // Views of the device input buffer.
  absl::Status Bind();
  // Replay's refusals, before anything is reserved; the step's cache spans.
  absl::StatusOr<std::vector<models::CacheSpan>> CheckReplay(const models::StepInput& input,
                                                             const boundary::PipelineTensors* in,
                                                             const Tensor* fed_ids) const;
  absl::Status CheckHandoffIn(const boundary::PipelineTensors* in, int64_t n) const;
  // The same device work a replay runs (warm-up and capture).
  absl::Status Record(bool capturing);

  models::DecoderModel& model_;
  models::KvCache& cache_;
  comm::ProcessGroups* groups_ = nullptr;
  int64_t batch_size_ = 0, rows_ = 0, table_width_ = 0;
  std::vector<int64_t> dp_rows_;  // batch_size_ for every DP group
  CudaStream owned_stream_;
  const CudaStream* stream_ = nullptr;
  CudaGraph graph_;
  // i32: ids, positions, slots (rows_ each), query_start, context_lens,
  // tables, state slots, last rows (mixed only) (batch_size_ each); the two
  // in turn, each with the point on the stream after its last upload.
  PinnedBuffer staging_[2];
  CudaEvent staged_[2];
  int next_staging_ = 0;
  Tensor inputs_;         // the device copy of staging_
  Tensor ids_, logits_, last_rows_;  // last_rows_: a mixed graph's
  bool owns_logits_ = true;          // logits_ is not a shared buffer
  boundary::PipelineTensors in_, out_;  // fixed handoff buffers (non-first / non-last piece)
  models::CacheBatch step_;
};

}  // namespace seam::runtime
