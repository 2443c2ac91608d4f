// Qwen3Model's two-batch-overlap forward: the step split into two
// operation-scheduled microbatches (boundary/two_batch.h), each layer's
// attention and FFN one operation each, run by the boundary's driver, each
// microbatch on its own CUDA stream and communicators when the caller gives
// them. The model issues no collective: the boundaries complete every sum.
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "seam/boundary/operation_schedule.h"
#include "seam/boundary/stream_ops.h"
#include "seam/boundary/two_batch.h"
#include "seam/core/cuda_graph.h"
#include "seam/core/status.h"
#include "seam/kernels/stream.h"
#include "src/qwen3_model_impl.h"
#include "src/step_inputs.h"

namespace seam::models {
namespace {

int64_t Tokens(const std::vector<SequenceStep>& sequences, size_t begin, size_t end) {
  int64_t n = 0;
  for (size_t i = begin; i < end; ++i) n += static_cast<int64_t>(sequences[i].tokens.size());
  return n;
}

// What a split must fit: A's sequences within the step, A's rows per DP
// group matching them, and no input fusion provider with streams of their own.
absl::Status CheckSplit(const ModelOptions& o, const StepInput& input, const TwoBatchStep& tbo) {
  const size_t n = input.sequences.size();
  if (tbo.a_sequences < 0 || static_cast<size_t>(tbo.a_sequences) > n) {
    return absl::InvalidArgumentError(
        absl::StrCat("two-batch step: microbatch A takes ", tbo.a_sequences, " of ", n, " sequences"));
  }
  const int dp = o.topology.dp_rank();
  const int64_t a_rows = Tokens(input.sequences, 0, tbo.a_sequences);
  if (static_cast<int>(tbo.a_dp_rows.size()) != o.topology.attn_dp || tbo.a_dp_rows[dp] != a_rows) {
    return absl::InvalidArgumentError(absl::StrCat("two-batch step: A's rows per DP group are [",
                                                   absl::StrJoin(tbo.a_dp_rows, ", "), "]; DP group ", dp,
                                                   "'s first ", tbo.a_sequences, " sequences hold ", a_rows));
  }
  if ((tbo.streams[0] != nullptr || tbo.streams[1] != nullptr) && o.fusions != nullptr) {
    return absl::FailedPreconditionError(
        "two-batch overlap on two CUDA streams with an input fusion provider: its buffers serve one call at a time");
  }
  return absl::OkStatus();
}

// Each microbatch on the stream tbo gives it (the caller's otherwise), with a
// matmul workspace of its own, after the caller's work so far.
absl::Status UseOwnStreams(const TwoBatchStep& tbo, void* caller, void* (&stream_of)[2]) {
  for (int i = 0; i < 2; ++i) {
    if (tbo.streams[i] != nullptr) stream_of[i] = tbo.streams[i];
    SEAM_RETURN_IF_ERROR(kernels::UseOwnMatmulWorkspace(stream_of[i]));
    SEAM_RETURN_IF_ERROR(StreamWaitStream(stream_of[i], caller));  // the embedding and the split
  }
  return absl::OkStatus();
}

}  // namespace

TwoBatchStep BalancedTwoBatchStep(const StepInput& input) {
  const size_t n = input.sequences.size();
  const int64_t total = Tokens(input.sequences, 0, n);
  TwoBatchStep step;
  int64_t best = total + 1, a = 0;
  for (size_t k = 0; k <= n; ++k) {
    const int64_t diff = std::abs(total - 2 * a);
    if (diff < best) {
      best = diff;
      step.a_sequences = static_cast<int>(k);
      step.a_dp_rows = {a};
    }
    if (k < n) a += static_cast<int64_t>(input.sequences[k].tokens.size());
  }
  return step;
}

absl::StatusOr<Tensor> Qwen3Model::ForwardTwoBatch(boundary::ForwardBatch& batch, const StepInput& input,
                                                   KvCache& cache, const TwoBatchStep& tbo) {
  const Impl& m = *impl_;
  if (!is_first_piece() || !is_last_piece()) {
    return absl::FailedPreconditionError("ForwardTwoBatch runs the whole stack; this rank holds a pipeline piece");
  }
  SEAM_RETURN_IF_ERROR(CheckSplit(options(), input, tbo));
  const bool own_streams = tbo.streams[0] != nullptr || tbo.streams[1] != nullptr;
  const StepInput parts[2] = {
      StepInput{{input.sequences.begin(), input.sequences.begin() + tbo.a_sequences}, input.all_logits},
      StepInput{{input.sequences.begin() + tbo.a_sequences, input.sequences.end()}, input.all_logits}};
  // The whole step is checked and embedded on the caller's stream, then split.
  SEAM_ASSIGN_OR_RETURN(internal::DeviceStep whole,
                        internal::PrepareStep(config(), options(), true, true, batch, input, nullptr));
  SEAM_ASSIGN_OR_RETURN(boundary::Hidden h, Enter(batch, whole.ids, nullptr));
  boundary::TwoBatchSplit split{tbo.a_dp_rows, tbo.comms[0], tbo.comms[1]};
  SEAM_ASSIGN_OR_RETURN(boundary::MicrobatchPair pair, boundary::SplitMicrobatches(h, batch, split, nullptr));
  internal::DeviceStep steps[2];
  for (int i = 0; i < 2; ++i) {
    SEAM_ASSIGN_OR_RETURN(steps[i],
                          internal::PrepareStep(config(), options(), true, true, pair.batch(i), parts[i], nullptr));
    if (!parts[i].sequences.empty()) SEAM_RETURN_IF_ERROR(internal::ReserveStep(cache, &steps[i]));
  }

  void* const caller = kernels::CurrentStream();
  kernels::ScopedStream restore(caller);
  void* stream_of[2] = {caller, caller};
  if (own_streams) SEAM_RETURN_IF_ERROR(UseOwnStreams(tbo, caller, stream_of));
  const int layers = static_cast<int>(m.layers.size());
  const int ops = 2 * layers + 1;
  const int64_t hidden = config().hidden_size;
  Tensor logits[2];
  boundary::MicrobatchOp op = [&](int mb, int k, boundary::ForwardBatch& part, boundary::Hidden& value) -> absl::Status {
    if (k == 2 * layers) {  // leave: the final norm (no finalize handoff here) and the lm_head
      SEAM_ASSIGN_OR_RETURN(Tensor normed, boundary::FinalNorm(value, part, ends_.final_norm, {}));
      SEAM_ASSIGN_OR_RETURN(logits[mb], Logits(normed, steps[mb].last_rows));
      return absl::OkStatus();
    }
    const internal::DecoderLayer& layer = *m.layers[k / 2];
    if (k % 2 == 0) {
      SEAM_ASSIGN_OR_RETURN(Tensor x, layer.attn_boundary->Prepare(value, part));
      Tensor out = x;  // no rows: hand the prepared tensor on
      if (x.rows() != 0) {
        SEAM_ASSIGN_OR_RETURN(out, layer.attention->Forward(x, steps[mb].cache, cache, k / 2));
      }
      SEAM_ASSIGN_OR_RETURN(value, layer.attn_boundary->Finish(out, part));
      return absl::OkStatus();
    }
    SEAM_ASSIGN_OR_RETURN(Tensor x, layer.ffn_boundary->Prepare(value, part));
    Tensor out = Tensor::Empty({0, hidden}, x.dtype(), x.device());
    if (x.rows() != 0) {
      if (layer.moe != nullptr) {
        SEAM_ASSIGN_OR_RETURN(out, layer.moe->Forward(x));
      } else {
        SEAM_ASSIGN_OR_RETURN(out, layer.mlp->Forward(x));
      }
    }
    // Operation-scheduled: the sum completes now, nothing is owed across the yield.
    SEAM_ASSIGN_OR_RETURN(value, layer.ffn_boundary->CompleteNow(out, part));
    return absl::OkStatus();
  };
  boundary::ScheduleHooks hooks;
  if (own_streams) {
    hooks.enter = [&](int mb) {
      kernels::SetCurrentStream(stream_of[mb]);
      return absl::OkStatus();
    };
  }
  absl::Status run = boundary::RunOperationSchedule(boundary::MakeTboSchedule(tbo.order, ops), ops, pair, op, hooks);
  kernels::SetCurrentStream(caller);
  if (own_streams) {  // the caller's stream waits for both microbatches, on success or not
    for (int i = 0; i < 2; ++i) {
      const absl::Status joined = StreamWaitStream(caller, stream_of[i]);
      if (run.ok()) run = joined;
    }
  }
  SEAM_RETURN_IF_ERROR(run);
  if (options().topology.attn_tp_rank() != 0) return Tensor();
  return boundary::MergeRows(logits[0], logits[1]);
}

}  // namespace seam::models
