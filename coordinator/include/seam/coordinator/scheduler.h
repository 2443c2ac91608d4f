// The coordinator's scheduler: continuous batching of prefill and decode into
// microbatches for a pipeline of P stages, admission bounded by the stages'
// KV budgets. A pure object: no threads, clocks or I/O; the caller drives it.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "seam/coordinator/scheduler_types.h"

namespace seam::coordinator {

// Contract
//
// Life of a request: Submit puts it in a FIFO queue. Admission takes the head
// of the queue when some DP group has free KV blocks for its prompt + 1 token
// (the first decode step); it goes to the least-loaded group that fits (most
// free blocks, then fewest sequences, then lowest index) and is never moved.
// Admission is strict FIFO: a head that fits nowhere blocks the ones behind
// it, so a long prompt is never starved by short ones (a request held for a
// prefix in flight steps aside: see prefix caching below). A group where a running
// sequence waits for a block admits nothing until that sequence is served.
//
// Next() builds a microbatch while fewer than max_inflight microbatches are
// out. In order, until the token or sequence limit is reached:
//   1. one decode step for each running sequence not in flight, oldest first;
//      a step that starts a new block allocates it first,
//   2. the next prefill chunk of each admitted sequence still prefilling,
//   3. newly admitted sequences (their first chunk, or the whole prompt).
// With chunked prefill, the prefill of a microbatch that has decode rows is
// bounded by max_mixed_prefill_tokens and, with itl_target_ms, by what the
// step time fit (fed by ObserveStepTime) predicts keeps the step within the
// target, never below kMinMixedPrefillTokens.
// A sequence is in at most one in-flight microbatch: its next step needs the
// token its current step samples. (Non-last prefill chunks could be
// pipelined, as every stage runs microbatches in order; they are not, to keep
// that invariant simple.)
//
// Out of KV, the policy is wait: a decode step whose next block cannot be
// allocated is skipped and retried by later Next() calls, after other
// sequences finish. Waiting alone could deadlock a group (all its sequences
// waiting, none in flight, so nothing ever frees a block); only then does the
// scheduler preempt, the most recently admitted sequence of that group: its
// blocks are freed and it returns to the head of the queue, to be recomputed
// as a prefill of prompt + the tokens it generated (whose sample is its next
// new token; tokens already streamed are not repeated). Submit refuses a
// request that cannot fit a group alone, so preemption always ends.
//
// Prefix caching (SchedulerOptions::prefix_caching, requests with
// cache_tokens): admission looks the prompt's full blocks up on every
// eligible group, cached and in flight (the next blocks of the prompt that
// a prefilling sequence of the group will publish). Where no group holds
// or computes any, the usual order. Otherwise each group scores the prompt
// tokens it saves less its load (prefill tokens its sequences have left,
// one per decoding sequence); the best group that fits takes the request,
// unless waiting for in-flight blocks scores higher: then the request is
// held in the queue, and those behind it that are not held are admitted in
// their FIFO order (it keeps its place; a request held never blocks
// others). A held request waits only on running sequences: one that is
// preempted, cancelled or failed stops counting, and the request then
// computes the blocks or follows whichever sequence computes them next.
// The sequence maps its cached blocks and its prefill starts after them
// (never at the prompt's end: its last token is always computed, for its
// logits). As steps complete, the sequence's full blocks (the prompt's,
// chunk by chunk, then those of its generated tokens) are cached
// (published); a partly filled block never is, and a cached block is never
// written again. Cached blocks no sequence maps stay
// until blocks run short: any allocation evicts them, least recently
// released first, before it waits. FailAll drops the whole cache.
//
// Complete / Fail end an in-flight microbatch. Sequences finish on
// max_new_tokens or a stop token (the stop token is emitted as a kToken event
// first), on Cancel, or fail; every end frees the sequence's KV blocks.
//
// Errors: INVALID_ARGUMENT for a request or result that can never be right
// (naming the sizes or ids); RESOURCE_EXHAUSTED for a full queue (retry
// later); ALREADY_EXISTS for a live duplicate id; NOT_FOUND for an unknown
// request or microbatch id. A refused call changes nothing.
//
// Not thread-safe: one owner (the coordinator's actor) calls it.
class Scheduler {
 public:
  // INVALID_ARGUMENT names the option and value that make no sense.
  static absl::StatusOr<std::unique_ptr<Scheduler>> Create(const SchedulerOptions& options);
  virtual ~Scheduler() = default;

  // Queues a request. INVALID_ARGUMENT: empty id, prompt_tokens < 1,
  // max_new_tokens < 1, prompt + max_new_tokens larger than one DP group's KV
  // budget, or (chunked prefill off) a prompt larger than a microbatch.
  // ALREADY_EXISTS: id is queued or running. RESOURCE_EXHAUSTED: max_queue
  // requests are waiting.
  virtual absl::Status Submit(const Request& request) = 0;

  // Ends a request. Queued or running and not in flight: ends now (returns
  // its kFinished/kCancelled event). In flight: returns no event; the request
  // ends with kCancelled when its microbatch completes or fails. NOT_FOUND for
  // an id that is not live.
  virtual absl::StatusOr<std::vector<SchedulerEvent>> Cancel(const std::string& request_id) = 0;

  // The next microbatch to send to the stages, or nullopt when max_inflight
  // microbatches are out or nothing can run now.
  virtual std::optional<Microbatch> Next() = 0;

  // Ends microbatch `microbatch_id` with one result per entry (any order).
  // Returns the events of its sequences, in entry order. NOT_FOUND: not in
  // flight. INVALID_ARGUMENT: a result is missing, duplicated, names a request
  // not in the microbatch, or lacks the token of a sampling entry.
  virtual absl::StatusOr<std::vector<SchedulerEvent>> Complete(
      uint64_t microbatch_id, const std::vector<SequenceResult>& results) = 0;

  // Every sequence of the microbatch fails with `status` (kFailed), e.g.
  // UNAVAILABLE when a stage died; their blocks are freed. NOT_FOUND: not in
  // flight. `status` must not be OK (INVALID_ARGUMENT).
  virtual absl::StatusOr<std::vector<SchedulerEvent>> Fail(uint64_t microbatch_id,
                                                           const absl::Status& status) = 0;

  // How long the stages took for in-flight microbatch `microbatch_id`,
  // reported before its Complete: a sample of the step time fit behind
  // SchedulerOptions::itl_target_ms (ignored when that is 0, and for
  // multi-step microbatches). NOT_FOUND: not in flight. INVALID_ARGUMENT:
  // negative or not finite.
  virtual absl::Status ObserveStepTime(uint64_t microbatch_id, double milliseconds) = 0;

  // Every live request (queued, running, in flight) fails with `status`;
  // in-flight microbatches are forgotten (a late Complete is NOT_FOUND) and
  // the epoch advances. The scheduler stays usable. `status` must not be OK.
  virtual absl::StatusOr<std::vector<SchedulerEvent>> FailAll(const absl::Status& status) = 0;

  // Introspection for tests and metrics.
  virtual int QueueDepth() const = 0;        // submitted (or preempted), not admitted
  virtual int RunningCount() const = 0;      // admitted, not ended
  virtual int InFlightCount() const = 0;     // microbatches out
  virtual int FreeBlocks(int dp_group) const = 0;
  virtual int SequencesOnGroup(int dp_group) const = 0;
  virtual uint64_t PreemptionCount() const = 0;
  virtual uint64_t Epoch() const = 0;
  virtual PrefixCacheStats PrefixStats() const = 0;
  virtual StepBudgetStats StepBudget() const = 0;
  virtual int CachedBlocks(int dp_group) const = 0;     // referenced or not; FreeBlocks excludes them
  virtual int EvictableBlocks(int dp_group) const = 0;  // cached blocks no sequence maps
  virtual const SchedulerOptions& options() const = 0;  // with defaults resolved
};

}  // namespace seam::coordinator
