// MicrobatchRunner: runs one microbatch descriptor on a configured stage,
// from checks through compute to its answer: receive the previous stage's
// handoff (non-first), compute, then send the handoff on (non-last) or
// sample each sequence's next token (last). A multi-step decode descriptor
// (decode_steps > 1) is taken into its wave and run, with the wave's other
// members, step by step once the wave is whole (decode_wave.cc): step k > 0
// feeds the tokens of step k - 1, which the last stage sends the first one
// over the data plane; on a stage that holds the whole model on one GPU
// the tokens stay on the device (decode_wave_fed.cc). Owned and driven by the stage actor's thread, which
// also owns the UCX worker it uses.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "seam/handoff/handoff.h"
#include "seam/handoff/ucx_worker.h"
#include "seam/runtime/stage_group.h"
#include "device_handoff_link.h"
#include "fed_tokens.h"
#include "seam/v1/stage_service.pb.h"
#include "sequence_sampler.h"
#include "stage_metrics.h"

namespace seam::server {

class MicrobatchRunner {
 public:
  // `previous` / `next`: endpoints to the neighbours (invalid where there is
  // none); `first`: the last stage's endpoint to the first (pipelines of two
  // or more), for the tokens of multi-step decode. Handoffs are sealed and verified under config.handoff_key(); one
  // listing more than `max_handoff_payload_bytes` is dropped unread.
  // `metrics` (may be null) times steps and handoffs. `links`: whether and
  // how the links to the neighbours may go GPU to GPU (device_handoff_link.h).
  // `handoff_timeout` bounds each wait of a descriptor without a budget
  // (MicrobatchDescriptor.budget_ms). `previous_key`: the handoff key of
  // the epoch before this one, whose late messages count as stale_epoch.
  MicrobatchRunner(const v1::StageConfig& config, std::unique_ptr<runtime::StageGroup> group, handoff::UcxWorker& worker,
                   handoff::UcxEndpoint previous, handoff::UcxEndpoint next, handoff::UcxEndpoint first,
                   absl::Duration handoff_timeout, uint64_t max_handoff_payload_bytes,
                   StageMetrics* metrics = nullptr, const HandoffLinkOptions& links = {},
                   const std::string& previous_key = "");

  // Runs `d` and gives its answers to `answer`: one for a single-step
  // descriptor; for a multi-step one, nothing until its wave is whole, then
  // the answers of every member of the wave (the last stage's of each step,
  // `more` set on all but a member's last; other stages' once a member is
  // done). Every descriptor gets exactly one answer without `more`. An error
  // becomes the answer's error, with this stage's pipeline rank. Never
  // throws. `arrived`: when the stage received `d`; its budget counts from
  // there (a wave's from its last member's), and once it runs out the
  // microbatch fails DEADLINE_EXCEEDED naming this stage: no wait for a
  // neighbour outlasts it, and no compute starts after it (without a
  // budget, each wait is bounded by the handoff timeout).
  using Answer = std::function<void(v1::MicrobatchResult)>;
  void Run(const v1::MicrobatchDescriptor& d, absl::Time arrived, const Answer& answer);
  // The single-step form (a descriptor with decode_steps <= 1).
  v1::MicrobatchResult Run(const v1::MicrobatchDescriptor& d, absl::Time arrived);

  // While the stage is idle: progresses the worker and takes what arrived
  // for the links (late handoffs dropped, early ones held for their
  // Receive, strays drained). True when the worker made progress.
  bool Poll();
  // When the stage reloads for a new epoch: takes every message still on
  // the worker off the wire, counting this epoch's as stale_epoch.
  void DrainForNewEpoch();

  // Polled while a handoff or token wait has nothing yet: non-OK ends the
  // wait with it (the actor sets it when the stage reloads or drains).
  void set_interrupted(std::function<absl::Status()> interrupted) { interrupted_ = std::move(interrupted); }
  // A fed wave of one member (decode_wave_fed.cc) enqueues, behind its last
  // step, the step after it (the sequences at position + steps, fed that
  // step's tokens on the device), so that the GPU works while the answer
  // travels to the coordinator and the next wave comes back. The next
  // descriptor takes that step as its step 0 when it continues the same
  // sequences exactly (ids, order, positions, input tokens, sampling);
  // otherwise the step is dropped: it only wrote KV at a position the next
  // step of those sequences writes again, within the blocks the
  // coordinator reserves for it (SchedulerImpl reserves steps + 1
  // positions for a multi-step run). Never for a model with recurrent
  // (Mamba) state, which a dropped step would change. Default on.
  void set_run_ahead(bool on) { run_ahead_ = on; }

  // The answer for a descriptor that is not run (drained away, abandoned).
  v1::MicrobatchResult Refuse(const v1::MicrobatchDescriptor& d, const absl::Status& why) const;

  // The sequence number of the last descriptor taken in this epoch; 0 before any.
  uint64_t last_sequence_number() const { return last_sequence_number_; }
  bool has_neighbours() const { return previous_.valid() || next_.valid() || first_.valid(); }
  // Free KV blocks of each attention-DP group.
  std::vector<uint64_t> FreeBlocks() const;
  // Data-plane messages dropped since this runner was made: handoff headers
  // (none on a first stage), and replies of the next stage's device link.
  handoff::HandoffDrops drops() const;
  // How handoffs travel from the previous stage and to the next one
  // (UNSPECIFIED where there is no such neighbour).
  v1::HandoffTransport transport_in() const;
  v1::HandoffTransport transport_out() const;

 private:
  // Takes `d` as the next descriptor of the stream: its order, the frees it
  // carries, its contents. Counts as run from here on. Returns what runs:
  // `d`, or with fed tokens filled in (fed_tokens.h) a copy, from which
  // entries with no token to feed are left out (their results wait in
  // fed_dropped_; the copy may hold no sequence then).
  absl::StatusOr<const v1::MicrobatchDescriptor*> Take(const v1::MicrobatchDescriptor& d);
  // One step of `d` (already taken): handoff in, compute, handoff out or
  // the sequences' results. `step`: the decode step of a multi-step
  // descriptor (its tokens and positions already set for the step).
  absl::Status Compute(const v1::MicrobatchDescriptor& d, uint32_t step, v1::MicrobatchResult& result);
  // The deadline of the microbatch (or wave) running for a wait that starts
  // now: its budget's end, or the handoff timeout from now without one.
  absl::Time WaitDeadline() const;
  // A send's: the wait deadline plus the handoff timeout (a receiver that
  // gave up on the handoff takes it off the wire as late).
  absl::Time SendDeadline() const;
  // DEADLINE_EXCEEDED, naming this stage and `what`, once the budget ran out.
  absl::Status CheckBudget(const v1::MicrobatchDescriptor& d, const char* what) const;
  // Sets the budget of the microbatch (or wave) about to run.
  void StartBudget(const v1::MicrobatchDescriptor& d, absl::Time arrived);
  // The sequence number through which every descriptor taken was answered.
  uint64_t AnsweredThrough() const;

  // The previous stage's handoff for step `step` of `d`, within its budget.
  absl::StatusOr<std::vector<boundary::PipelineTensors>> ReceiveHandoff(const v1::MicrobatchDescriptor& d,
                                                                        uint32_t step);

  // decode_wave.cc: a multi-step descriptor joins the wave; the wave runs once whole.
  void TakeIntoWave(const v1::MicrobatchDescriptor& d, absl::Time arrived, const Answer& answer);
  void RunWave(const Answer& answer);
  absl::Status CheckWaveMember(const v1::MicrobatchDescriptor& d) const;
  // decode_wave_fed.cc: PP 1 on one GPU, each step's tokens fed on the
  // device and answered while the next step runs.
  bool CanFeedWave(const std::vector<v1::MicrobatchDescriptor>& wave, uint32_t steps) const;
  void RunWaveFed(const std::vector<v1::MicrobatchDescriptor>& wave, uint32_t steps, const Answer& answer);
  // The step run ahead of the last wave (set_run_ahead), if any.
  struct Ahead {
    v1::MicrobatchDescriptor wave;  // the member it continues
    uint32_t steps = 0;             // that wave's steps: the step runs at position + steps
    runtime::FedStep fed;
    std::vector<int32_t> inputs;    // the tokens it was fed (the wave's last step's)
    absl::Time at;
  };
  // Whether `d` is the wave member that continues ahead_ exactly.
  bool ContinuesAhead(const v1::MicrobatchDescriptor& d) const;
  // Enqueues the step after a fed wave of one member; false when it may not run ahead.
  bool RunAhead(const v1::MicrobatchDescriptor& d, uint32_t steps, const runtime::FedStep& last);
  // The first stage: the tokens step `step` of `d` feeds, from the last stage.
  absl::StatusOr<std::vector<int32_t>> ReceiveTokens(const v1::MicrobatchDescriptor& d, uint32_t step);
  // The last stage: sends the first the tokens step `step` of `d` feeds.
  absl::Status SendTokens(const v1::MicrobatchDescriptor& d, uint32_t step, const std::vector<int32_t>& tokens);
  // Answers for whole-microbatch failures and the last stage's step results.
  void AnswerError(const v1::MicrobatchDescriptor& d, const absl::Status& why, const Answer& answer) const;
  // After a step begun at `started` (nothing without metrics): its time, each
  // rank's Synchronize wait, graph or eager; its time under `kind`.
  void RecordStep(absl::Time started, StepKind kind);

  v1::StageConfig config_;
  std::unique_ptr<runtime::StageGroup> group_;
  handoff::UcxWorker& worker_;
  handoff::UcxEndpoint previous_, next_, first_;
  absl::Duration handoff_timeout_;
  // The budget of the microbatch or wave running: its end, and its length in ms (0: none).
  absl::Time budget_end_ = absl::InfiniteFuture();
  uint64_t budget_ms_ = 0;
  absl::Time wave_budget_end_ = absl::InfinitePast();  // the latest member's of the wave being gathered
  uint64_t wave_budget_ms_ = 0;
  uint64_t link_ = 0;                     // this epoch's link tag (for idle drains)
  std::optional<uint64_t> previous_link_;  // the previous epoch's
  handoff::HandoffDrops idle_drops_;      // strays drained while idle, and at the epoch's end
  std::unique_ptr<IncomingLink> incoming_;  // from previous_; null on the first stage
  std::unique_ptr<OutgoingLink> outgoing_;  // to next_; null on the last stage
  // The first stage of a pipeline of two or more: tokens from the last stage.
  std::unique_ptr<handoff::HandoffReceiver> token_receiver_;
  // The last stage of a pipeline of two or more: tokens to the first.
  std::unique_ptr<handoff::HandoffSender> token_sender_;
  // Multi-step descriptors taken of the wave that is not yet whole.
  std::vector<v1::MicrobatchDescriptor> wave_;
  std::function<absl::Status()> interrupted_;
  bool run_ahead_ = true;
  std::optional<Ahead> ahead_;
  SequenceSampler sampler_;
  // One pipeline stage: the tokens it chose last, for the fed steps of the next microbatch.
  bool WholePipeline() const { return group_->is_first_piece() && group_->is_last_piece(); }
  FedTokens fed_;
  v1::MicrobatchDescriptor fed_storage_;
  std::vector<v1::SequenceResult> fed_dropped_;
  uint64_t last_sequence_number_ = 0;
  absl::Time last_answer_ = absl::InfinitePast();  // when the previous microbatch ended (debug timing)
  // Set when a handoff wait ran out of time: the previous stage may still
  // send that handoff, so the next wait discards handoffs of other
  // microbatches instead of failing on them.
  bool late_handoff_possible_ = false;
  // Metrics of this pipeline rank, and the graph counts already reported.
  std::optional<StageMetrics::Rank> metrics_;
  int64_t graph_replays_seen_ = 0, eager_steps_seen_ = 0;
};

}  // namespace seam::server
