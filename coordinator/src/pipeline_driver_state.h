// The driver thread's state: the Scheduler, the live calls and sequences and
// the microbatches in flight, with the decisions taken on each message
// (admit, send, complete, fail). Only the driver thread touches it.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "pipeline_driver.h"
#include "seam/v1/stage_service.pb.h"
#include "sequence_output.h"

namespace seam::coordinator {

struct PipelineDriver::State {
  using Clock = std::chrono::steady_clock;

  struct Call {
    DriverCall call;
    int remaining = 0;  // sequences not ended
    bool done = false;  // observer->OnDone was called
    std::vector<std::string> sequence_ids;
  };
  // One sequence of a call, from Admit until its end.
  struct Sequence {
    std::shared_ptr<Call> call;
    int index = 0;                // in its call (SequenceName)
    std::vector<int32_t> tokens;  // prompt, then generated
    uint64_t sequence_id = 0;     // names it and its KV on the stages for its whole life
    bool sent = false;            // some stage may hold KV for sequence_id
    bool scheduled = false;       // its first prefill chunk went out (CallObserver::OnScheduled)
    bool ended = false;
    v1::SequenceSampling sampling;           // the last stage's, sent with its first entry
    std::unique_ptr<SequenceOutput> output;  // its text and stop strings (generating calls)
    std::vector<float> logprobs;  // scoring: from the last stage
    // The last stage's log-probs of the token its next kToken event brings
    // (single-step microbatches).
    std::optional<v1::ChosenTokenLogprobs> pending_logprobs;
    // Multi-step decode: tokens already given to the observer as the last
    // stage answered each step, ahead of the scheduler's events for them
    // (which then only record them), and whether one of them was a stop
    // token (nothing after it is streamed).
    int streamed = 0;
    bool stream_stopped = false;
  };
  struct InFlight {
    Microbatch microbatch;
    Clock::time_point deadline;
    std::chrono::milliseconds bound{0};  // deadline - time sent
    Clock::time_point sent{};            // when its descriptors were written
    std::vector<bool> answered;  // per stage
    int answers = 0;
    absl::Status error;          // the first stage error
    v1::MicrobatchResult last;   // the last stage's result
    // Multi-step decode: each sequence's tokens of the steps answered so
    // far, and the first error a step gave it, by stage sequence id.
    std::unordered_map<uint64_t, std::vector<int32_t>> step_tokens;
    std::map<uint64_t, absl::Status> step_errors;
    // The microbatch's sequences (scheduler request ids) by stage sequence
    // id, made at its first step's answer.
    std::unordered_map<uint64_t, std::string> step_names;
  };

  // `delivery` runs the observers' callbacks (it outlives the state).
  State(const PipelineDriverOptions& options, std::unique_ptr<Scheduler> scheduler,
        std::vector<StageLink*> links, CallDelivery* delivery, std::function<void(int)> on_stage_down);

  void Admit(DriverCall call);
  // Sends every microbatch the scheduler offers, while the pipeline is up.
  void Pump();
  // `read`: when the stage link's thread read it (debug timing).
  void OnResult(int stage, const v1::MicrobatchResult& result, Clock::time_point read = Clock::now());
  void OnBroken(int stage, const absl::Status& status);
  // Stage deadlines of microbatches, client deadlines and cancellations.
  void CheckTimes(Clock::time_point now);
  // The pipeline takes no more work: every live call ends with `status`
  // (UNAVAILABLE), and later calls are refused with it.
  void GoDown(const absl::Status& status);
  uint64_t Epoch() const { return scheduler->Epoch(); }
  PipelineDriver::Load CurrentLoad() const;
  std::function<void(int64_t tokens)> microbatch_sent;  // PipelineDriver::ObserveMicrobatches
  bool Down() const { return down; }
  const absl::Status& DownStatus() const { return down_status; }  // why, while Down()
  // The pipeline is back: `new_links` reach stages configured for Epoch().
  void Recover(std::vector<StageLink*> new_links);

 private:
  void Finalize(uint64_t microbatch_id);
  // Queues `callback(observer)` on the call's delivery lane.
  template <typename F>
  void Notify(const Call& call, F&& callback);
  // Gives `token` of `s` to its observer (text, stop strings, log-probs);
  // true when a stop string ended the sequence with it.
  bool Deliver(Sequence& s, int32_t token, const v1::ChosenTokenLogprobs* logprobs);
  // Ends sequence `id`, whose text reached a stop string, in the scheduler.
  void EndAtStopString(const std::string& id);
  // A step's answer from the last stage of a multi-step microbatch: records
  // each sequence's token and streams it to its observer.
  void RecordStep(InFlight& f, const v1::MicrobatchResult& result);
  // A microbatch as the stages get it: `common` for every stage but the
  // last, `last` (common plus each starting sequence's sampling) for it.
  struct Described {
    v1::MicrobatchDescriptor common, last;
  };
  // Sets d's budget and sends it to every stage (the last its own); false
  // once a stage is down.
  bool Send(const Microbatch& mb, Described& d);
  // After Send: OnScheduled for sequences whose first chunk it carried, and microbatch_sent.
  void NoteSent(const Microbatch& mb);
  void Handle(const std::vector<SchedulerEvent>& events);
  void EndCall(std::shared_ptr<Call> call, const absl::Status& status);
  void Release(Sequence& seq);
  void StageDown(int stage, const absl::Status& status);
  Described Describe(const Microbatch& mb);
  bool UsesPrefixCache(const DriverCall& call) const;
  std::string RequestsOf(const Microbatch& mb) const;

  PipelineDriverOptions options;
  std::unique_ptr<Scheduler> scheduler;
  std::vector<StageLink*> links;
  CallDelivery* delivery;
  std::function<void(int)> on_stage_down;
  bool down = false;
  absl::Status down_status;
  // Microbatches failed one after another; at kMaxFailedInARow the pipeline
  // goes down and is reconfigured.
  static constexpr int kMaxFailedInARow = 3;
  int failed_in_a_row = 0;
  // When the last microbatch ended on the driver thread (debug timing of
  // the coordinator's part of a round trip: its end to the next send).
  Clock::time_point last_end{};
  Clock::time_point handled{};   // when the ended microbatch's events were handled
  Clock::time_point received{};  // when the link thread read the result being handled
  int64_t last_hop_us = 0;       // the ended microbatch's last result: link thread to driver thread
  // When the last stage's answer to the last microbatch that ended was
  // read: a step's time starts at its send or there, whichever is later
  // (the stages were busy with the one ahead until then).
  Clock::time_point last_step_end{};
  uint64_t timed_steps = 0;  // since the fit existed: every 256th is logged (debug)
  // Tells the scheduler how long the stages took for `f` (ObserveStepTime).
  void ObserveStepTime(const InFlight& f);
  uint64_t last_ended = 0;
  Clock::time_point last_call_sweep{};  // CheckTimes' last look at the live calls
  uint64_t next_sequence_id = 1;
  // By SequenceName, the scheduler's request id (hashed: looked up for every row of every answer).
  std::unordered_map<std::string, Sequence> sequences;
  std::vector<std::shared_ptr<Call>> calls;         // live calls
  std::map<uint64_t, InFlight> in_flight;           // by microbatch id
  std::vector<uint64_t> to_free;                    // finished_sequence_ids of the next descriptor
  // Prefix caching: changes of a microbatch that was never sent, for the next descriptor.
  std::vector<v1::CachedBlock> unsent_published, unsent_evicted;
  // Adds the microbatch's cached-block changes (after the unsent ones) to `d`.
  void DescribeCachedBlocks(const Microbatch& mb, v1::MicrobatchDescriptor& d);
};

}  // namespace seam::coordinator
