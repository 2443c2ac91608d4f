// A stage group's steps: Plan (step_plan.h, against the group's present
// state), then Run: every rank replays the plan's graph or runs the eager
// forward, waits once for its stream and collectives, and leaves its
// output; the group then records the placements and hands the output back.
#include <memory>

#include "absl/strings/str_cat.h"
#include "seam/core/device_memory.h"
#include "seam/core/logging.h"
#include "seam/core/status.h"
#include "src/piece_handoff.h"
#include "src/stage_group_impl.h"

namespace seam::runtime {

using internal::Leaving;
using internal::Placed;
using internal::RankState;

// What every rank thread of one step reads; owned by the step's tasks, so a
// rank past the step's deadline still finds it.
struct StageGroup::Impl::RankJob {
  StepPlan plan;
  std::vector<boundary::PipelineTensors> in;
  std::vector<std::vector<TokenChoice>> choices_by_dp;  // StepOutput::kTokens: each DP group's, in its row order
  uint64_t microbatch = 0;
};

namespace {

// The last piece's output on a rank: the chosen tokens where the logits are,
// or the logits on the host.
absl::Status LeaveLogits(RankState& rank, const Tensor& logits, const StageGroup::Impl::RankJob& job) {
  rank.logits = Tensor();
  rank.tokens.clear();
  rank.logprobs.clear();
  if (!logits.defined()) return absl::OkStatus();
  if (job.plan.output != StepOutput::kTokens) {
    SEAM_ASSIGN_OR_RETURN(rank.logits, logits.To(Device::CPU()));
    return absl::OkStatus();
  }
  const std::vector<TokenChoice>& mine = job.choices_by_dp[rank.topology.dp_rank()];
  if (mine.empty()) return absl::OkStatus();
  SEAM_ASSIGN_OR_RETURN(rank.tokens,
                        ChooseTokens(logits.Rows(0, static_cast<int64_t>(mine.size())), mine, &rank.logprobs));
  return absl::OkStatus();
}

// Collectives are stream-ordered: a step waits for them once, bounded (a
// missed deadline aborts the communicator), before anything is read.
absl::Status WaitForStep(RankState& rank, absl::Duration timeout) {
  const absl::Time wait = absl::Now();
  SEAM_RETURN_IF_ERROR(rank.groups->Synchronize(wait + timeout));
  rank.synchronize_seconds = absl::ToDoubleSeconds(absl::Now() - wait);
  return absl::OkStatus();
}

// Each sequence's output, in input order, from the ranks that hold it
// (attention-TP rank 0 of its DP group).
PieceOutput CollectOutput(const StepPlan& plan, const std::vector<std::unique_ptr<RankState>>& ranks, int attn_tp) {
  PieceOutput out;
  if (plan.output == StepOutput::kHandoff) {
    for (const auto& rank : ranks) out.handoff.push_back(std::move(rank->handoff));
    return out;
  }
  for (const SequencePlan& s : plan.sequences) {
    const RankState& holder = *ranks[s.dp_group * attn_tp];
    if (plan.output == StepOutput::kTokens) {
      out.tokens.push_back(holder.tokens.at(static_cast<size_t>(s.logit_row)));
      out.logprobs.push_back(holder.logprobs.at(static_cast<size_t>(s.logit_row)));
    } else {
      const int64_t count = plan.output == StepOutput::kAllLogits ? s.tokens : 1;
      out.logits.push_back(holder.logits.Rows(s.logit_row, count).Clone());
    }
  }
  return out;
}

}  // namespace

absl::Status StageGroup::Impl::RunRank(int r, const RankJob& job) {
  RankState& rank = *ranks[r];
  const Device device = RankDevice(r);
  SEAM_RETURN_IF_ERROR(UseDevice(device));
  const StepPlan& plan = job.plan;
  const models::StepInput& input = plan.dp_groups[rank.topology.dp_rank()].input;
  const boundary::PipelineTensors* in = job.in.empty() ? nullptr : &job.in[r];
  if (plan.execution != StepExecution::kEager) {
    DecodeGraph& graph = plan.execution == StepExecution::kGraph ? *rank.graphs.at(plan.bucket)
                                                                 : *rank.mixed_graphs.at(plan.bucket);
    SEAM_ASSIGN_OR_RETURN(DecodeGraphOutput o, graph.Replay(input, in));
    SEAM_RETURN_IF_ERROR(WaitForStep(rank, options.comm_timeout));  // after the replay, never inside a capture
    SEAM_ASSIGN_OR_RETURN(rank.handoff, Leaving(o.handoff, device, options.handoff_on_device));
    return LeaveLogits(rank, o.logits, job);
  }
  boundary::ForwardBatch batch(job.microbatch, plan.variant, rank.topology, plan.dp_rows);
  batch.comms = boundary::StageComms{&rank.groups->tp(), &rank.groups->attn_tp(), &rank.groups->attn_dp(),
                                     &rank.groups->attn_cp()};
  rank.handoff = boundary::PipelineTensors{};
  boundary::PipelineTensors entering;
  if (in != nullptr) {
    SEAM_ASSIGN_OR_RETURN(entering, Placed(*in, device));
  }
  SEAM_ASSIGN_OR_RETURN(Tensor logits, rank.model->ForwardPiece(batch, input, *rank.cache,
                                                                in == nullptr ? nullptr : &entering, &rank.handoff));
  SEAM_RETURN_IF_ERROR(WaitForStep(rank, options.comm_timeout));
  // Handoffs leave on the host (for UCX) or on the GPU (a device transport); logits for sampling.
  SEAM_ASSIGN_OR_RETURN(rank.handoff, Leaving(rank.handoff, device, options.handoff_on_device));
  return LeaveLogits(rank, logits, job);
}

absl::StatusOr<StepPlan> StageGroup::Plan(const std::vector<models::SequenceStep>& sequences, bool all_logits,
                                          const std::vector<boundary::PipelineTensors>& in,
                                          const std::vector<TokenChoice>* choices) const {
  const Impl& g = *impl_;
  if (!g.broken.ok()) {
    return absl::FailedPreconditionError(absl::StrCat("the stage group failed earlier: ", g.broken.ToString()));
  }
  StepRequest request;
  request.sequences = &sequences;
  request.all_logits = all_logits;
  request.choose_tokens = choices != nullptr;
  request.choices = choices == nullptr ? 0 : choices->size();
  request.in = &in;
  return PlanStep(request, g.PlanFacts(), g.PlanState());
}

absl::StatusOr<PieceOutput> StageGroup::Run(const StepPlan& plan, const std::vector<boundary::PipelineTensors>& in,
                                            const std::vector<TokenChoice>* choices) {
  Impl& g = *impl_;
  if (!g.broken.ok()) {
    return absl::FailedPreconditionError(absl::StrCat("the stage group failed earlier: ", g.broken.ToString()));
  }
  if (plan.group_step != g.version) {
    return absl::FailedPreconditionError("the step plan is stale: the group has run or freed since it was made");
  }
  if ((choices != nullptr) != (plan.output == StepOutput::kTokens) ||
      (choices != nullptr && choices->size() != plan.sequences.size())) {
    return absl::InvalidArgumentError("the token choices do not match the step plan");
  }
  auto job = std::make_shared<Impl::RankJob>();
  job->plan = plan;
  job->in = in;
  job->microbatch = g.next_microbatch++;
  job->choices_by_dp.resize(g.attn_dp);
  if (choices != nullptr) {
    for (size_t i = 0; i < plan.sequences.size(); ++i) {
      job->choices_by_dp[plan.sequences[i].dp_group].push_back((*choices)[i]);
    }
  }
  const bool graph = plan.execution != StepExecution::kEager;
  g.variant_log.Note(job->microbatch, plan.variant, g.options.variants, plan.dp_rows, graph);
  SEAM_LOG_DEBUG("step {}: {}", job->microbatch, plan.ToString());
  Impl* self = &g;
  const absl::Status run = g.RunOnAll([self, job](int r) { return self->RunRank(r, *job); });
  ++g.version;
  if (!run.ok()) {
    g.broken = run;
    return run;
  }
  for (const SequencePlan& s : plan.sequences) {
    if (s.placed_now) g.dp_of[s.sequence] = s.dp_group;
  }
  if (plan.execution == StepExecution::kGraph) {
    ++g.graph_stats.replays[plan.bucket];
  } else if (plan.execution == StepExecution::kMixedGraph) {
    ++g.graph_stats.mixed_replays[plan.bucket];
  } else {
    ++g.graph_stats.eager_steps;
  }
  return CollectOutput(plan, g.ranks, g.attn_tp());
}

absl::StatusOr<PieceOutput> StageGroup::StepPiece(const std::vector<models::SequenceStep>& sequences, bool all_logits,
                                                  const std::vector<boundary::PipelineTensors>& in,
                                                  const std::vector<TokenChoice>* choices) {
  SEAM_ASSIGN_OR_RETURN(const StepPlan plan, Plan(sequences, all_logits, in, choices));
  return Run(plan, in, choices);
}

absl::StatusOr<std::vector<Tensor>> StageGroup::Step(const std::vector<models::SequenceStep>& sequences, bool all_logits) {
  if (!is_first_piece() || !is_last_piece()) {
    return absl::FailedPreconditionError(absl::StrCat("Step runs the whole model; this group holds layers [",
                                                      first_layer(), ", ", end_layer(), "): use StepPiece"));
  }
  SEAM_ASSIGN_OR_RETURN(PieceOutput out, StepPiece(sequences, all_logits, {}));
  return std::move(out.logits);
}

}  // namespace seam::runtime
