// The scheduler's implementation class, shared by its source files:
// scheduler.cc (creation, Submit, Cancel, introspection), microbatch_builder.cc
// (Next, admission, preemption) and scheduler_results.cc (Complete, Fail).
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "kv_budget.h"
#include "prefix_cache.h"
#include "request_state.h"
#include "step_time_model.h"
#include "seam/coordinator/scheduler.h"

namespace seam::coordinator {

class SchedulerImpl final : public Scheduler {
 public:
  explicit SchedulerImpl(const SchedulerOptions& options);

  absl::Status Submit(const Request& request) override;
  absl::StatusOr<std::vector<SchedulerEvent>> Cancel(const std::string& request_id) override;
  std::optional<Microbatch> Next() override;
  absl::StatusOr<std::vector<SchedulerEvent>> Complete(
      uint64_t microbatch_id, const std::vector<SequenceResult>& results) override;
  absl::StatusOr<std::vector<SchedulerEvent>> Fail(uint64_t microbatch_id,
                                                   const absl::Status& status) override;
  absl::StatusOr<std::vector<SchedulerEvent>> FailAll(const absl::Status& status) override;
  absl::Status ObserveStepTime(uint64_t microbatch_id, double milliseconds) override;

  int QueueDepth() const override { return static_cast<int>(queue_.size()); }
  int RunningCount() const override { return static_cast<int>(running_.size()); }
  int InFlightCount() const override { return static_cast<int>(in_flight_.size()); }
  int FreeBlocks(int dp_group) const override { return kv_.Free(dp_group); }
  int SequencesOnGroup(int dp_group) const override { return sequences_on_group_[dp_group]; }
  uint64_t PreemptionCount() const override { return preemptions_; }
  uint64_t Epoch() const override { return epoch_; }
  PrefixCacheStats PrefixStats() const override;
  StepBudgetStats StepBudget() const override;
  int CachedBlocks(int dp_group) const override { return prefix_.Cached(dp_group); }
  int EvictableBlocks(int dp_group) const override { return prefix_.Evictable(dp_group); }
  const SchedulerOptions& options() const override { return options_; }

 private:
  // A microbatch under construction, with its remaining room.
  struct Draft {
    Microbatch mb;
    std::vector<bool> group_waiting;  // a decode step of the group lacked a block
    int decode_rows = 0;              // decode entries taken so far
    int prefill_tokens = 0;           // prefill tokens taken so far
    int64_t context_tokens = 0;       // KV positions its entries read (start + tokens each)
  };

  // microbatch_builder.cc
  void BreakDeadlocks();
  bool GroupDeadlocked(int group) const;
  void Preempt(std::string request_id);  // by value: callers pass an id of running_, which it erases
  // Decode steps one microbatch may take (see AddDecodeSteps).
  int DecodeShare() const;
  // Steps the next microbatch runs (see SchedulerOptions::max_decode_steps);
  // 0: none now (a wave runs; its sequences are waited for).
  int DecodeSteps() const;
  void AddDecodeSteps(Draft& draft);
  // KV positions a run of `steps` decode steps holds (see microbatch_builder.cc).
  static int RunKvTokens(const RequestState& state, int steps);
  void AddPrefillChunks(Draft& draft);
  void AdmitFromQueue(Draft& draft);
  // Tokens of the next prefill chunk of `state` that fit the draft; 0: none.
  int ChunkFor(const RequestState& state, const Draft& draft) const {
    return ChunkOf(state.PrefillRemaining(), state.prefilled, draft);
  }
  // The same for a prefill with `remaining` tokens left from position `start`.
  int ChunkOf(int remaining, int start, const Draft& draft) const;
  bool HasRoomForSequence(const Draft& draft) const;
  void AddEntry(Draft& draft, RequestState& state, int start, int tokens, bool is_prefill,
                bool is_last_chunk, bool feeds_previous = false);
  // SchedulerOptions::overlap_steps (microbatch_builder.cc): whether one more
  // microbatch may go out now; whether a sequence in flight takes the fed
  // decode step after its running entry, or its prompt's next chunk.
  bool MayOverlap() const;
  bool FedNext(const RequestState& state) const;
  bool NextChunkAhead(const RequestState& state) const;

  // scheduler_step_budget.cc: SchedulerOptions::itl_target_ms.
  // What the step time model counts of a draft (or a built microbatch).
  static StepFeatures FeaturesOf(const Draft& draft);
  // Most prefill tokens a chunk starting at `start` may add to a draft with
  // decode rows under the target (at least what brings the draft to
  // kMinMixedPrefillTokens); INT_MAX when the target does not apply.
  int TargetRoom(int start, const Draft& draft) const;
  // Records the budget and prediction of a built draft (StepBudgetStats).
  void NoteBudget(const Draft& draft);

  // scheduler_prefix.cc: blocks with the prefix cache.
  // Free blocks of `group` once every unreferenced cached block is evicted.
  int Available(int group) const { return kv_.Free(group) + prefix_.Evictable(group); }
  // Takes `blocks` from `group`, evicting unreferenced cached blocks as
  // needed; false (nothing changes) when Available does not hold them.
  bool TakeBlocks(int group, int blocks);
  // The DP group a queued request goes to and the cached blocks it maps
  // there; group -1 when none fits; `wait`: it is held, for the blocks a
  // sequence of `group` is prefilling (see AdmitFromQueue).
  struct Placement {
    int group = -1;
    std::vector<uint64_t> hits;
    bool wait = false;
  };
  // `load[g]`: GroupLoad(g), kept up to date by the caller as it admits.
  Placement Place(const RequestState& state, const std::vector<bool>& eligible, const std::vector<int64_t>& load) const;
  // Tokens group `group` has yet to compute before a new prompt's: the
  // prefill left of its prefilling sequences, one per decoding sequence.
  int64_t GroupLoad(int group) const;
  // Of `state`'s prompt blocks after its `hits` on `group` (at most
  // `max_blocks` in all), how many a prefilling sequence of the group will
  // publish next: the longest such run over the group's sequences; 0 when
  // none computes the first block `state` misses.
  int InFlightBlocks(int group, const RequestState& state, const std::vector<uint64_t>& hits, int max_blocks) const;
  // Counts an admission's lookup in PrefixStats.
  void CountLookup(const RequestState& state, size_t hits);
  // Appends a sampled token to the sequence's cache_tokens (caching requests).
  void RecordCacheToken(RequestState& state, int32_t token);
  // Caches the full blocks a completed step filled: the prompt's, then
  // those of generated tokens (a conversation's next turn replays them).
  void PublishBlocks(RequestState& state);
  // Drops the sequence's references to cached blocks (its end or preemption).
  void ReleaseCached(RequestState& state);
  // Every cached block forgotten, with the changes the stages were yet to get.
  void DropPrefixCache();

  // scheduler_results.cc: an in-flight entry of the request has ended.
  static void Landed(RequestState& state, const MicrobatchEntry& entry);

  // scheduler.cc: ends a live request (not in flight), releasing its blocks,
  // and appends its terminal event.
  void End(const std::string& request_id, SchedulerEvent event,
           std::vector<SchedulerEvent>& events);
  static SchedulerEvent Finished(const std::string& id, FinishReason reason);
  static SchedulerEvent Failed(const std::string& id, const absl::Status& status);

  SchedulerOptions options_;
  KvBudget kv_;
  PrefixCache prefix_;
  PrefixCacheStats prefix_stats_;
  StepTimeModel step_model_;
  int last_prefill_budget_ = 0;
  double last_predicted_ms_ = 0;
  // Cached-block changes for the next microbatch (Microbatch::published, evicted).
  std::vector<CachedBlockChange> published_, evicted_;
  std::unordered_map<std::string, RequestState> requests_;  // every live request
  std::deque<std::string> queue_;                            // not admitted, FIFO
  std::map<uint64_t, std::string> running_;                  // admit_order -> id
  std::vector<int> sequences_on_group_;
  std::map<uint64_t, Microbatch> in_flight_;                 // microbatch id -> microbatch
  uint64_t next_admit_order_ = 0;
  uint64_t next_microbatch_id_ = 1;
  uint64_t next_sequence_number_ = 1;  // each epoch starts at 1
  uint64_t epoch_ = 0;
  uint64_t preemptions_ = 0;
  std::vector<std::string> preempted_since_last_;  // handed to the next microbatch
  // Steps of the wave being formed (the last microbatch built was
  // multi-step and none has ended since); 0 when none is.
  int wave_steps_ = 0;
  // The microbatch Next() builds goes out while another runs (overlap_steps).
  bool building_ahead_ = false;
};

}  // namespace seam::coordinator
