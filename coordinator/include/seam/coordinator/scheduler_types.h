// The data the coordinator's scheduler takes and gives: its options, the
// requests it admits, the microbatches it builds and the events it returns.
// All plain values; the scheduler itself is in scheduler.h.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "seam/core/step_limits.h"

namespace seam::coordinator {

// Most steps one multi-step decode microbatch may run (SchedulerOptions::max_decode_steps).
inline constexpr int kMaxDecodeSteps = 64;
// The least prefill tokens a step with decode rows may take under
// SchedulerOptions::itl_target_ms, however slow the fit predicts it.
inline constexpr int kMinMixedPrefillTokens = 16;

// Every field has a default; Scheduler::Create refuses values that make no
// sense (INVALID_ARGUMENT naming the field and value).
struct SchedulerOptions {
  // Pipeline stages P. A microbatch passes through every stage in turn, so P
  // microbatches in flight keep every stage busy.
  int pipeline_stages = 1;
  // Attention data-parallel groups D. Each sequence lives on one group for its
  // whole life; each group has its own KV budget.
  int dp_groups = 1;
  // KV blocks of one DP group: the minimum over the stages (every stage holds
  // the KV of its own layers for every sequence of the group).
  int kv_blocks_per_dp_group = 1024;
  // Tokens of KV per block.
  int block_size = static_cast<int>(kDefaultKvBlockSize);
  // Token rows of one microbatch, summed over all DP groups (prefill chunks
  // plus one row per decode step). A served coordinator sets the least the
  // stages take (PipelineLimits::max_step_tokens); the default is theirs.
  int max_tokens_per_microbatch = static_cast<int>(kDefaultMaxStepTokens);
  // Sequences of one microbatch, summed over all DP groups.
  int max_sequences_per_microbatch = 256;
  // Sequences one DP group holds at once (admitted and not yet finished):
  // the stages' Mamba state slots, where they keep state. 0: unbounded.
  int max_sequences_per_dp_group = 0;
  // Microbatches handed out by Next() and not yet completed or failed.
  // 0 means pipeline_stages, so that all stages work at once.
  int max_inflight_microbatches = 0;
  // One pipeline stage only: while a microbatch of single steps runs, the
  // next is built and sent, so that the stage starts it as soon as it ends
  // instead of waiting for the round trip through the coordinator. A
  // sequence whose running entry samples (a decode step, a prompt's last
  // chunk) takes the step after it, fed on the stage the token that entry
  // chooses (SequenceEntry.feed_previous_token); a prompt takes its next
  // chunk. A sequence that ends with the running step's token (a stop token
  // or string, a cancel) has the next step's token dropped. No sequence is
  // built past max_new_tokens. Multi-step runs (waves) do not overlap.
  bool overlap_steps = false;
  // Requests waiting for admission; Submit beyond it is RESOURCE_EXHAUSTED.
  int max_queue = 1024;
  // Chunked prefill: a prompt is prefilled in pieces of at most
  // prefill_chunk_tokens, one piece per microbatch, interleaved with decode
  // steps. Off: a prompt is prefilled whole, so it must fit
  // max_tokens_per_microbatch.
  bool chunked_prefill = false;
  int prefill_chunk_tokens = 512;
  // With chunked prefill: prefill tokens a microbatch that also carries
  // decode rows may take (0: up to max_tokens_per_microbatch). Bounds how
  // long a decode row waits behind prefill work in one step (its inter-token
  // latency) while prefill-only steps still fill the microbatch.
  int max_mixed_prefill_tokens = 0;
  // With chunked prefill: a target for the time of a step that carries
  // decode rows, in milliseconds (0: none). The scheduler learns the
  // stages' step time from the times the caller reports (ObserveStepTime)
  // as a + e·(has prefill rows) + b·prefill tokens + c·decode rows + d·KV
  // positions read (step_time_model.h); such a
  // step then takes the prefill tokens the fit predicts keep it within the
  // target, at least kMinMixedPrefillTokens (so prefill always progresses)
  // and never more than the bounds above. Until the fit exists (enough
  // steps timed, prefill tokens that varied) only the bounds above apply.
  // A step without decode rows is not limited by it. With one pipeline
  // stage it is the decode rows' inter-token latency; with P stages a
  // decode row waits about P such steps per token.
  double itl_target_ms = 0;
  // Multi-step decode: a microbatch of decode steps only may run up to
  // max_decode_steps steps at once on the stages (each step feeds the token
  // the previous one chose, without a round trip to the coordinator). It
  // runs fewer when a sequence of it has fewer tokens left to generate, and
  // one while any request waits for admission or is prefilling, so that a
  // new request's first token is never held back by a long run. 1: off.
  int max_decode_steps = 1;
  // Positions a sequence may reach on the stages (the model's positions and
  // the stages' context, the least). With it, a run of several steps may
  // take more steps than some of its sequences have tokens left: those run
  // past their last token (its later tokens dropped, its KV positions within
  // this bound and the KV budget), so that sequences which started decoding
  // a few steps apart do not end as a tail of single steps. 0: unknown, a
  // run takes at most the fewest tokens any of its sequences has left.
  int max_context = 0;
  // Where runs of several steps start after an admission: no more steps
  // than max(first_decode_steps, tokens the sequence has made), so runs
  // ramp 1, 2, 4, 8, ... with 1 (a burst's later arrivals join early) and
  // start at max_decode_steps with max_decode_steps (fewer round trips).
  int first_decode_steps = 1;
  // Prefix caching: full blocks of a prompt that an earlier request on the
  // same DP group computed (same tokens from the start, same cache salt)
  // are mapped, not computed again; the prefill starts after them. Only
  // requests that give cache_tokens take part. A request whose next blocks
  // a sequence of the group is prefilling now waits for them (requests
  // that arrive together compute a shared prefix once). Admission trades
  // the prompt tokens a group holds against the tokens it has queued (see
  // Scheduler). Off: every prompt is computed.
  bool prefix_caching = false;
  // The epoch of the first microbatch (a coordinator that adopts running
  // stages starts past their epoch); FailAll advances it.
  uint64_t first_epoch = 0;
};

// A generation request. Positions index the sequence's tokens: the prompt
// followed by the tokens generated so far. The caller keeps the token ids;
// the scheduler needs only counts, and the sampled ids it is told.
struct Request {
  std::string id;                        // unique among live requests
  int prompt_tokens = 0;                 // prompt length, >= 1
  int max_new_tokens = 1;                // generation stops after this many, >= 1
  std::vector<int32_t> stop_token_ids;   // generation stops after sampling one of these
  int min_tokens = 0;                    // ... once the request has at least this many tokens
  // Prefix caching (SchedulerOptions::prefix_caching): the prompt's token
  // ids, whose full blocks are looked up at admission and cached once
  // computed (and then the full blocks of the tokens it generates, which a
  // conversation's next turn replays). Empty: this request neither uses nor
  // fills the cache.
  std::vector<int32_t> cache_tokens;
  // Blocks are shared only between requests of equal salts.
  std::string cache_salt;
  // The caller's name for the sequence on the stages, echoed in
  // CachedBlockChange::sequence_tag (it may outlive the request there).
  uint64_t sequence_tag = 0;
};

// One sequence's step inside a microbatch.
struct MicrobatchEntry {
  std::string request_id;
  int dp_group = 0;
  // Positions [start_position, start_position + num_tokens) of the sequence
  // are computed in this step (their KV written at every stage).
  int start_position = 0;
  int num_tokens = 0;
  // First row of this entry in its DP group's rows of the microbatch (entries
  // of one group are packed in order).
  int row_offset = 0;
  // Prefill (prompt, or prompt + generated tokens when recomputed after a
  // preemption) or a one-token decode step.
  bool is_prefill = false;
  // True when this step samples a token: a decode step, or the last chunk of
  // a prefill. Non-last chunks only write KV.
  bool is_last_chunk = true;
  // For a decode step: the token fed at start_position (the last one
  // sampled). -1 for prefill entries and fed steps.
  int32_t input_token = -1;
  // A decode step built while the sequence's previous step runs
  // (SchedulerOptions::overlap_steps): the stage feeds it the token that
  // step chooses.
  bool feeds_previous = false;
  // The sequence's first entry only, with a prefix-cache hit: the cached
  // blocks that are its first blocks (start_position is the tokens they hold).
  std::vector<uint64_t> shared_blocks;
};

// A change to the stages' map of cached blocks, carried by the next
// microbatch: block `block_index` of the request's sequence becomes cached
// block `block_id` (published), or cached block `block_id` is dropped (evicted).
struct CachedBlockChange {
  int dp_group = 0;
  uint64_t block_id = 0;
  std::string request_id;     // published only
  uint64_t sequence_tag = 0;  // published only: Request::sequence_tag
  int block_index = 0;        // published only
};

// Prefix cache counters since creation (cached blocks: now).
struct PrefixCacheStats {
  uint64_t queries = 0;       // admissions that looked the prompt up
  uint64_t query_tokens = 0;  // their prompt tokens
  uint64_t hit_tokens = 0;    // of those, tokens found cached
  uint64_t evictions = 0;     // cached blocks evicted
  // Requests held at admission while a sequence of their DP group computed
  // the next blocks of their prompt (each counted once, however long it waited).
  uint64_t waited_requests = 0;
  int cached_blocks = 0;      // over all DP groups
};

// The step time fit behind SchedulerOptions::itl_target_ms, and what it chose.
struct StepBudgetStats {
  int samples = 0;     // timed steps the fit is made from (its window)
  bool fitted = false; // the coefficients below are a fit (else all 0)
  double intercept_ms = 0, prefill_step_ms = 0, prefill_token_ms = 0, decode_row_ms = 0, context_token_ms = 0;
  // The last step with decode rows built while the fit existed: the
  // prefill tokens the target allowed a chunk starting at position 0 (at
  // least kMinMixedPrefillTokens; before the other bounds), and the time
  // the fit predicted for the step as built. 0 before any.
  int last_prefill_budget = 0;
  double last_predicted_ms = 0;
};

// A unit of work that every stage runs, in sequence_number order.
struct Microbatch {
  uint64_t id = 0;               // names the microbatch in Complete / Fail
  uint64_t sequence_number = 0;  // 1, 2, 3, ... within an epoch: the order every stage runs them
  uint64_t epoch = 0;            // bumped by FailAll; stages drop work of older epochs
  // entries_by_group[g]: the entries of DP group g (size dp_groups; a group
  // may have none this step).
  std::vector<std::vector<MicrobatchEntry>> entries_by_group;
  int num_tokens = 0;            // rows summed over all groups
  int num_sequences = 0;         // entries summed over all groups
  // Steps the stages run this microbatch for (see max_decode_steps): every
  // entry is then a decode step whose step k feeds position start_position + k.
  int decode_steps = 1;
  // Requests preempted since the previous microbatch: the scheduler already
  // counts their blocks as free (this microbatch may use them), so the
  // stages must free their KV before running it.
  std::vector<std::string> preempted;
  // Prefix caching: blocks published and evicted since the previous
  // microbatch; the stages apply them, published first, before they free
  // the finished sequences and run this microbatch.
  std::vector<CachedBlockChange> published;
  std::vector<CachedBlockChange> evicted;
};

// The outcome of one sequence's step, reported to Complete.
struct SequenceResult {
  std::string request_id;
  // The sampled token, required (>= 0) when the entry samples
  // (is_last_chunk) and status is OK; ignored otherwise.
  int32_t token = -1;
  // Not OK: this sequence failed (only it); its KV is freed.
  absl::Status status;
  // A microbatch of decode_steps > 1: the token chosen at each step, in step
  // order (exactly decode_steps of them when status is OK); `token` is unused.
  std::vector<int32_t> tokens;
};

// kStopString is never the scheduler's: the driver ends a sequence whose
// text reached a stop string (a Cancel the driver reports as this reason).
enum class FinishReason { kMaxTokens, kStopToken, kCancelled, kStopString };
const char* FinishReasonName(FinishReason reason);

// What the API layer streams to clients. Every submitted request gets exactly
// one terminal event (kFinished or kFailed); kToken events precede it.
struct SchedulerEvent {
  enum class Kind { kToken, kFinished, kFailed };
  Kind kind = Kind::kToken;
  std::string request_id;
  int32_t token = -1;                              // kToken
  FinishReason reason = FinishReason::kMaxTokens;  // kFinished
  absl::Status status;                             // kFailed
};

}  // namespace seam::coordinator
