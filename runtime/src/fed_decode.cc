// StageGroup's decode steps fed on the device: a graph replay whose chosen
// tokens stay on the GPU for the next step and reach the host through a
// pinned buffer and an event, so that the caller enqueues step k + 1 before
// it waits for step k's tokens. In a TP group (one attention-DP group) TP
// rank 0, which holds the logits, chooses, and a broadcast over the TP
// communicator, enqueued on every rank's stream after its replay, gives
// every rank the tokens its next replay embeds; nothing waits on the host.
#include <algorithm>
#include <memory>

#include "absl/strings/str_cat.h"
#include "seam/core/device_memory.h"
#include "seam/core/status.h"
#include "seam/kernels/ops.h"
#include "src/stage_group_impl.h"

namespace seam::runtime {
namespace {

using internal::FedSlots;
using internal::RankState;

// What one fed step hands its rank thread; the rank fills `step`.
struct FedJob {
  models::StepInput input;
  std::vector<TokenChoice> choices;
  std::vector<uint64_t> ids;
  int64_t bucket = 0, rows = 0;
  std::optional<FedStep> feed;
  FedStep step;
};

// Chooses the tokens of `logits` [n, vocab] into `out` (i32 [n]) on the
// rank's stream, as ChooseTokens does, the sampled rows' steps staged in `steps`.
absl::Status ChooseOnDevice(const Tensor& logits, const std::vector<TokenChoice>& choices, FedSlots& f, int64_t slot,
                            const CudaStream& stream, const Tensor& out) {
  const int64_t n = static_cast<int64_t>(choices.size());
  bool all_greedy = true;
  for (const TokenChoice& c : choices) all_greedy = all_greedy && c.params.temperature <= 0.0f;
  if (all_greedy) return kernels::Argmax(logits, out);
  int32_t* host = f.HostSteps(slot);
  for (int64_t i = 0; i < n; ++i) host[i] = choices[i].step;
  SEAM_ASSIGN_OR_RETURN(Tensor slot_steps, f.steps.Rows(slot, 1).Reshape({f.rows}));
  const Tensor steps = slot_steps.Rows(0, n);
  SEAM_RETURN_IF_ERROR(UploadAsync(steps.raw_data(), steps.device(), host, n * sizeof(int32_t), stream));
  for (int64_t i = 0; i < n; ++i) {
    const Tensor row = logits.Rows(i, 1), chosen = out.Rows(i, 1);
    if (choices[i].params.temperature <= 0.0f) {
      SEAM_RETURN_IF_ERROR(kernels::Argmax(row, chosen));
    } else {
      SEAM_RETURN_IF_ERROR(kernels::Sample(row, choices[i].params, steps.Rows(i, 1), chosen));
    }
  }
  return absl::OkStatus();
}

// The rank thread's part of a fed step: replay, choose (TP rank 0), hand the
// tokens to every rank (TP > 1), copy them out (TP rank 0). Every rank keeps
// the same slot sequence, so the step's slot and generation agree.
absl::Status RunFedStep(RankState& rank, int r, int tp, Device device, int64_t most_rows, absl::Duration timeout,
                        FedJob& job) {
  SEAM_RETURN_IF_ERROR(UseDevice(device));
  if (rank.fed == nullptr) {
    SEAM_ASSIGN_OR_RETURN(rank.fed, FedSlots::Create(device, most_rows));
  }
  FedSlots& f = *rank.fed;
  const int64_t n = job.rows;
  const int64_t slot = static_cast<int64_t>(f.next % FedSlots::kFedSlots);
  // The slot's previous step has left it (its tokens copied out, its steps uploaded).
  SEAM_RETURN_IF_ERROR(f.done[slot].Wait(absl::Now() + timeout));
  Tensor fed_ids;
  if (job.feed.has_value()) fed_ids = f.DeviceTokens(job.feed->slot, n);
  SEAM_ASSIGN_OR_RETURN(DecodeGraphOutput o, rank.graphs.at(job.bucket)->Replay(job.input, nullptr,
                                                                                 job.feed ? &fed_ids : nullptr));
  const Tensor out = f.DeviceTokens(slot, n);
  if (r == 0) SEAM_RETURN_IF_ERROR(ChooseOnDevice(o.logits, job.choices, f, slot, rank.stream, out));
  if (tp > 1) SEAM_RETURN_IF_ERROR(rank.groups->tp().Broadcast(out, 0));
  if (r == 0) {
    SEAM_RETURN_IF_ERROR(DownloadAsync(f.HostTokens(slot), out.raw_data(), device, n * sizeof(int32_t), rank.stream));
  }
  SEAM_RETURN_IF_ERROR(f.done[slot].Record(rank.stream));
  f.sequences[slot] = job.ids;
  f.generation[slot] = ++f.next;
  if (r == 0) job.step = FedStep{slot, f.generation[slot], n};
  return absl::OkStatus();
}

}  // namespace

bool StageGroup::CanStepFed(const std::vector<models::SequenceStep>& sequences) const {
  const Impl& g = *impl_;
  if (!g.broken.ok() || !on_gpu() || g.tp > g.options.fed_decode_max_tp || g.attn_dp != 1 || attn_cp() != 1 ||
      !is_first_piece() || !is_last_piece() || sequences.empty()) {
    return false;
  }
  for (const models::SequenceStep& s : sequences) {
    if (s.tokens.size() != 1 || DpGroupOf(s.sequence) != 0 || (s.dp_group >= 0 && s.dp_group != 0)) return false;
  }
  // How the step would run; the fed step itself checks the cache.
  StepRequest request;
  request.sequences = &sequences;
  StepPlanState state = g.PlanState();
  state.bounded_by_caches = false;
  const absl::StatusOr<StepPlan> plan = PlanStep(request, g.PlanFacts(), state);
  return plan.ok() && plan->execution == StepExecution::kGraph;
}

absl::StatusOr<FedStep> StageGroup::StepFed(const std::vector<models::SequenceStep>& sequences,
                                            const std::vector<TokenChoice>& choices, const FedStep* feed) {
  Impl& g = *impl_;
  if (!g.broken.ok()) {
    return absl::FailedPreconditionError(absl::StrCat("the stage group failed earlier: ", g.broken.ToString()));
  }
  if (!CanStepFed(sequences)) {
    return absl::FailedPreconditionError(
        "this step cannot be fed on the device (a whole-model CUDA group of one attention-DP group without CP, of "
        "at most fed_decode_max_tp ranks, with graph decode, runs decode steps of placed sequences that a graph "
        "bucket holds)");
  }
  const int64_t n = static_cast<int64_t>(sequences.size());
  if (static_cast<int64_t>(choices.size()) != n) {
    return absl::InvalidArgumentError(absl::StrCat("a fed step takes one token choice per sequence: ", choices.size(),
                                                   " for ", n, " sequences"));
  }
  for (const TokenChoice& c : choices) {
    if (!c.edits.empty() || c.logprobs || c.top_logprobs > 0) {
      return absl::InvalidArgumentError("a fed step chooses from unedited logits without log-probs: run choices "
                                        "with edits or log-probs through StepPiece");
    }
  }
  auto job = std::make_shared<FedJob>();
  job->input.sequences = sequences;
  job->choices = choices;
  job->rows = n;
  for (const models::SequenceStep& s : sequences) job->ids.push_back(s.sequence);
  std::vector<uint64_t> sorted = job->ids;
  std::sort(sorted.begin(), sorted.end());
  if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end()) {
    return absl::InvalidArgumentError("a sequence appears twice in one fed step");
  }
  RankState& rank = *g.ranks[0];
  if (feed != nullptr) {
    const bool live = rank.fed != nullptr && feed->slot >= 0 && feed->slot < FedSlots::kFedSlots &&
                      rank.fed->generation[feed->slot] == feed->generation;
    if (!live) return absl::FailedPreconditionError("the fed step this step feeds from is no longer held");
    if (rank.fed->sequences[feed->slot] != job->ids) {
      return absl::FailedPreconditionError("a fed step feeds from a step of other sequences (or in another order)");
    }
    job->feed = *feed;
  }
  StepRequest request;
  request.sequences = &sequences;
  SEAM_ASSIGN_OR_RETURN(const StepPlan plan, PlanStep(request, g.PlanFacts(), g.PlanState()));  // the cache's room
  job->bucket = plan.bucket;
  const int64_t most_rows = *std::max_element(g.options.graph_buckets.begin(), g.options.graph_buckets.end());
  Impl* self = &g;
  const absl::Duration timeout = g.options.comm_timeout;
  const int tp = g.tp;
  const absl::Status run = g.RunOnAll([self, job, most_rows, timeout, tp](int r) {
    return RunFedStep(*self->ranks[r], r, tp, self->RankDevice(r), most_rows, timeout, *job);
  });
  if (!run.ok()) {
    ++g.version;
    g.broken = run;
    g.AbortCollectives();
    return run;
  }
  ++g.version;
  ++g.graph_stats.replays[job->bucket];
  return job->step;
}

absl::StatusOr<std::vector<int32_t>> StageGroup::FedTokens(const FedStep& step) {
  Impl& g = *impl_;
  FedSlots* f = g.ranks.empty() ? nullptr : g.ranks[0]->fed.get();
  const auto live = [&] {
    return f != nullptr && step.slot >= 0 && step.slot < FedSlots::kFedSlots && f->generation[step.slot] == step.generation;
  };
  if (!live()) return absl::FailedPreconditionError("the fed step's tokens are no longer held");
  SEAM_RETURN_IF_ERROR(UseDevice(g.RankDevice(0)));  // the event's device, on the calling thread
  const absl::Status done = f->done[step.slot].Wait(absl::Now() + g.options.comm_timeout);
  if (!done.ok()) {
    g.broken = Annotate(done, "waiting for a fed decode step");
    g.AbortCollectives();
    return g.broken;
  }
  const int32_t* tokens = f->HostTokens(step.slot);
  return std::vector<int32_t>(tokens, tokens + step.sequences);
}

}  // namespace seam::runtime
