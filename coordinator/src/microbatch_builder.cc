// Next(): continuous batching of decode steps, prefill chunks and new
// admissions into one microbatch; the deadlock breaker that preempts.
#include <algorithm>
#include <climits>
#include <optional>
#include <utility>

#include "scheduler_impl.h"
#include "seam/core/status.h"

namespace seam::coordinator {

// overlap_steps: one more microbatch in flight while those in flight are
// single steps (a wave's sequences come back together).
bool SchedulerImpl::MayOverlap() const {
  if (!options_.overlap_steps) return false;
  for (const auto& [id, mb] : in_flight_) {
    if (mb.decode_steps > 1) return false;
  }
  return true;
}

std::optional<Microbatch> SchedulerImpl::Next() {
  const bool overlap = MayOverlap();
  if (InFlightCount() >= options_.max_inflight_microbatches + (overlap ? 1 : 0)) return std::nullopt;
  building_ahead_ = overlap && InFlightCount() > 0;
  BreakDeadlocks();
  Draft draft;
  draft.mb.entries_by_group.resize(options_.dp_groups);
  draft.group_waiting.assign(options_.dp_groups, false);
  draft.mb.decode_steps = DecodeSteps();
  if (draft.mb.decode_steps == 0) return std::nullopt;  // a wave runs: its sequences come back together
  AddDecodeSteps(draft);
  AddPrefillChunks(draft);
  if (draft.mb.decode_steps == 1) AdmitFromQueue(draft);
  if (draft.mb.num_sequences == 0) return std::nullopt;
  NoteBudget(draft);
  draft.mb.id = next_microbatch_id_++;
  draft.mb.sequence_number = next_sequence_number_++;
  draft.mb.epoch = epoch_;
  draft.mb.preempted = std::move(preempted_since_last_);
  preempted_since_last_.clear();
  draft.mb.published = std::move(published_);
  draft.mb.evicted = std::move(evicted_);
  published_.clear();
  evicted_.clear();
  in_flight_.emplace(draft.mb.id, draft.mb);
  // Multi-step microbatches built one after another, before any completes,
  // form one wave (the stages run its members step by step in turn).
  wave_steps_ = draft.mb.decode_steps > 1 ? draft.mb.decode_steps : 0;
  return std::move(draft.mb);
}

// A group is deadlocked when it has running sequences, none in flight, and
// every one is a decode step that needs more blocks than the group has free:
// no completion can ever free a block there.
bool SchedulerImpl::GroupDeadlocked(int group) const {
  bool any = false;
  for (const auto& [order, id] : running_) {
    const RequestState& state = requests_.at(id);
    if (state.dp_group != group) continue;
    any = true;
    if (state.in_flight > 0 || state.phase != Phase::kDecoding) return false;
    const int need = kv_.BlocksFor(state.DecodeKvTokens()) - state.TableBlocks();
    if (need <= Available(group)) return false;
  }
  return any;
}

void SchedulerImpl::BreakDeadlocks() {
  for (int g = 0; g < options_.dp_groups; ++g) {
    while (GroupDeadlocked(g)) {
      // The youngest sequence of the group gives its blocks back.
      for (auto it = running_.rbegin(); it != running_.rend(); ++it) {
        if (requests_.at(it->second).dp_group == g) {
          Preempt(it->second);
          break;
        }
      }
    }
  }
}

void SchedulerImpl::Preempt(std::string request_id) {
  RequestState& state = requests_.at(request_id);
  SEAM_CHECK(state.in_flight == 0 && state.phase != Phase::kQueued);
  kv_.Release(state.dp_group, state.blocks);
  ReleaseCached(state);
  sequences_on_group_[state.dp_group] -= 1;
  running_.erase(state.admit_order);
  ResetForRecompute(state);
  queue_.push_front(request_id);
  preempted_since_last_.push_back(request_id);
  preemptions_ += 1;
}

bool SchedulerImpl::HasRoomForSequence(const Draft& draft) const {
  return draft.mb.num_sequences < options_.max_sequences_per_microbatch &&
         draft.mb.num_tokens < options_.max_tokens_per_microbatch;
}

void SchedulerImpl::AddEntry(Draft& draft, RequestState& state, int start, int tokens,
                             bool is_prefill, bool is_last_chunk, bool feeds_previous) {
  auto& group = draft.mb.entries_by_group[state.dp_group];
  MicrobatchEntry entry;
  entry.request_id = state.request.id;
  entry.dp_group = state.dp_group;
  entry.start_position = start;
  entry.num_tokens = tokens;
  entry.row_offset = group.empty() ? 0 : group.back().row_offset + group.back().num_tokens;
  entry.is_prefill = is_prefill;
  entry.is_last_chunk = is_last_chunk;
  entry.input_token = is_prefill || feeds_previous ? -1 : state.last_token;
  entry.feeds_previous = feeds_previous;
  SEAM_CHECK(draft.mb.decode_steps == 1 || !is_prefill);
  group.push_back(std::move(entry));
  draft.mb.num_tokens += tokens;
  draft.mb.num_sequences += 1;
  (is_prefill ? draft.prefill_tokens : draft.decode_rows) += tokens;
  draft.context_tokens += start + tokens;
  state.in_flight += 1;
  state.ahead_tokens += tokens;
  state.ahead_samples += is_last_chunk ? 1 : 0;
  state.feedable = is_last_chunk && draft.mb.decode_steps == 1;
}

// overlap_steps, while a microbatch runs: the sequence's one entry in flight
// samples, so the step after it can be fed that token on the stage; none
// past max_new_tokens.
bool SchedulerImpl::FedNext(const RequestState& state) const {
  return building_ahead_ && state.in_flight == 1 && state.feedable && !state.cancelled &&
         state.TokensLeftPastInFlight() >= 1;
}

// overlap_steps, while a microbatch runs: the prompt's chunk in flight is
// not its last, so its next chunk can follow it.
bool SchedulerImpl::NextChunkAhead(const RequestState& state) const {
  return building_ahead_ && state.in_flight == 1 && !state.feedable && !state.cancelled &&
         state.phase == Phase::kPrefilling && state.NextPosition() < state.prefill_target;
}

// Decode steps are spread over the microbatches in flight: with P stages and
// D decoding sequences a microbatch takes at most ceil(D / P) of them, so P
// microbatches of decode keep every stage busy instead of one microbatch
// holding them all while the other stages idle.
// A run of several steps also holds the position after its last: a stage
// may run the next step ahead there (stage_server's set_run_ahead) before
// it knows whether the sequence goes on. A sequence that runs past its last
// token (DecodeSteps) holds those positions too, from the free blocks.
int SchedulerImpl::RunKvTokens(const RequestState& state, int steps) {
  return state.DecodeKvTokens(steps > 1 ? steps + 1 : steps);
}

int SchedulerImpl::DecodeShare() const {
  int decoding = 0;
  for (const auto& [order, id] : running_) {
    const RequestState& state = requests_.at(id);
    // FedNext of a prefilling sequence: its prompt's last chunk runs, its first decode step follows.
    decoding += state.phase == Phase::kDecoding || FedNext(state) ? 1 : 0;
  }
  const int slots = std::max(1, options_.max_inflight_microbatches);
  return std::max(1, (decoding + slots - 1) / slots);
}

// Several steps only when nothing else waits for the stages (no request
// queued or prefilling) and every decoding sequence not in flight has made
// that many tokens (past first_decode_steps) and has the KV blocks for them;
// otherwise one. A run takes at most the most tokens any of them has left:
// with max_context known, the others run past their last token (their later
// tokens are dropped) where their positions stay within it; without, at most
// the fewest left. A wave is formed while nothing else is in flight and
// grows until a microbatch ends. While microbatches are in flight, a run of
// several steps is not started apart from them (0: wait), so that the next
// wave takes every sequence; single steps go on meanwhile. With every
// decoding sequence in flight, one where the run they would form when they
// land is a single step anyway (so steps fed while one runs, overlap_steps,
// carry the tail of a load), else 0.
int SchedulerImpl::DecodeSteps() const {
  if (options_.max_decode_steps == 1 || !queue_.empty()) return 1;
  int steps = wave_steps_ > 1 ? wave_steps_ : options_.max_decode_steps;
  int fewest_left = steps, most_left = 0, furthest = 0;  // furthest: the latest KV position a sequence holds
  bool any_out = false;  // a decoding sequence not in flight, which a run could take
  // Over the sequences in flight: the fewest and most tokens left past what is in flight (those with any).
  int fewest_after = INT_MAX, most_after = 0;
  for (const auto& [order, id] : running_) {
    const RequestState& state = requests_.at(id);
    if (state.phase == Phase::kPrefilling) return 1;
    if (state.in_flight > 0) {
      const int after = state.TokensLeftPastInFlight();
      if (after >= 1) fewest_after = std::min(fewest_after, after), most_after = std::max(most_after, after);
      continue;
    }
    any_out = true;
    // No more steps than (past first_decode_steps) tokens made so far: with
    // first_decode_steps 1 runs start short after an admission (1, 2, 4, 8,
    // ...), so requests of a burst that arrive a few steps apart still join
    // at once.
    steps = std::min(steps, std::max(options_.first_decode_steps, state.generated));
    fewest_left = std::min(fewest_left, state.TokensLeft());
    most_left = std::max(most_left, state.TokensLeft());
    furthest = std::max(furthest, state.kv_tokens);
  }
  // Every sequence in flight: when they land, the run they form is one step
  // (one of them has a single token left), so a step fed while this one runs
  // (overlap_steps) loses nothing; otherwise wait for them, for the run.
  if (!any_out) {
    const int run_after = options_.max_context > 0 ? most_after : fewest_after;
    return run_after == 1 ? 1 : 0;
  }
  // Whether every group has the KV blocks for a run of `k` steps.
  const auto fits = [&](int k) {
    std::vector<int> need(options_.dp_groups, 0);
    for (const auto& [order, id] : running_) {
      const RequestState& state = requests_.at(id);
      if (state.in_flight > 0) continue;
      need[state.dp_group] += std::max(0, kv_.BlocksFor(RunKvTokens(state, k)) - state.TableBlocks());
    }
    for (int g = 0; g < options_.dp_groups; ++g) {
      if (need[g] > Available(g)) return false;
    }
    return true;
  };
  // Past the last token only within the positions the stages hold (RunKvTokens: the steps and one ahead).
  const bool run_past = options_.max_context > 0 && most_left > 0 && furthest + steps + 1 <= options_.max_context;
  int run = std::min(steps, run_past ? most_left : fewest_left);
  std::optional<bool> fitted;  // fits(run), once asked
  if (run > fewest_left) {
    fitted = fits(run);
    if (!*fitted) {  // no blocks to run past: as before
      run = std::min(steps, fewest_left);
      fitted.reset();
    }
  }
  if (run <= 1) return 1;
  if (wave_steps_ > 1) {
    if (run != wave_steps_) return 1;  // not in the wave being formed
  } else if (!in_flight_.empty()) {
    return 0;
  }
  if (!fitted) fitted = fits(run);
  return *fitted ? run : 1;
}

void SchedulerImpl::AddDecodeSteps(Draft& draft) {
  const int share = DecodeShare();
  int taken = 0;
  for (const auto& [order, id] : running_) {
    if (!HasRoomForSequence(draft) || taken == share) return;
    RequestState& state = requests_.at(id);
    const bool fed = FedNext(state);
    if (!fed && (state.in_flight > 0 || state.phase != Phase::kDecoding)) continue;
    const int need = kv_.BlocksFor(RunKvTokens(state, draft.mb.decode_steps)) - state.TableBlocks();
    if (need > 0) {
      if (!TakeBlocks(state.dp_group, need)) {
        draft.group_waiting[state.dp_group] = true;  // waits for a block
        continue;
      }
      state.blocks += need;
    }
    AddEntry(draft, state, state.NextPosition(), 1, /*is_prefill=*/false, /*is_last_chunk=*/true, fed);
    ++taken;
  }
}

int SchedulerImpl::ChunkOf(int remaining, int start, const Draft& draft) const {
  int room = options_.max_tokens_per_microbatch - draft.mb.num_tokens;
  if (options_.chunked_prefill) {
    if (options_.max_mixed_prefill_tokens > 0 && draft.decode_rows > 0) {
      room = std::min(room, options_.max_mixed_prefill_tokens - draft.prefill_tokens);
    }
    room = std::min(room, TargetRoom(start, draft));
    return std::max(0, std::min({remaining, options_.prefill_chunk_tokens, room}));
  }
  // Whole prefill in one step; only a recomputed prefill longer than a
  // microbatch is cut, into microbatch-sized pieces.
  const int piece = std::min(remaining, options_.max_tokens_per_microbatch);
  return piece <= room ? piece : 0;
}

void SchedulerImpl::AddPrefillChunks(Draft& draft) {
  for (const auto& [order, id] : running_) {
    if (!HasRoomForSequence(draft)) return;
    RequestState& state = requests_.at(id);
    if (!NextChunkAhead(state) && (state.in_flight > 0 || state.phase != Phase::kPrefilling)) continue;
    const int start = state.NextPosition(), remaining = state.prefill_target - start;
    const int chunk = ChunkOf(remaining, start, draft);
    if (chunk == 0) return;  // oldest first: a younger prefill does not overtake
    AddEntry(draft, state, start, chunk, /*is_prefill=*/true, chunk == remaining);
  }
}

// The queue in order. A request held for blocks in flight (Place's wait)
// stays where it is and the ones behind it go on; any other that cannot be
// admitted now (no group fits, or its first chunk does not fit the draft)
// stops admission: strict FIFO among the requests not held.
void SchedulerImpl::AdmitFromQueue(Draft& draft) {
  std::vector<bool> eligible(options_.dp_groups);
  const int most = options_.max_sequences_per_dp_group;
  for (int g = 0; g < options_.dp_groups; ++g) eligible[g] = !draft.group_waiting[g];
  std::vector<int64_t> load(options_.dp_groups, 0);
  if (options_.prefix_caching) {
    for (int g = 0; g < options_.dp_groups; ++g) load[g] = GroupLoad(g);
  }
  size_t next = 0;
  while (next < queue_.size() && HasRoomForSequence(draft)) {
    for (int g = 0; g < options_.dp_groups; ++g) {
      if (most > 0 && sequences_on_group_[g] >= most) eligible[g] = false;  // its state slots are taken
    }
    const std::string id = queue_[next];
    RequestState& state = requests_.at(id);
    Placement place = Place(state, eligible, load);
    if (place.wait) {
      if (!state.waited) prefix_stats_.waited_requests += 1;
      state.waited = true;
      ++next;
      continue;
    }
    if (place.group < 0) return;
    const int hit_tokens = static_cast<int>(place.hits.size()) * kv_.BlockSize();
    if (ChunkOf(state.prefill_target - hit_tokens, hit_tokens, draft) == 0) return;
    const int group = place.group;
    const int reserve = kv_.BlocksFor(state.AdmissionKvTokens()) - static_cast<int>(place.hits.size());
    prefix_.Acquire(group, place.hits);  // before evicting: its hits stay
    SEAM_CHECK(TakeBlocks(group, reserve));
    CountLookup(state, place.hits.size());
    queue_.erase(queue_.begin() + static_cast<std::ptrdiff_t>(next));
    state.phase = Phase::kPrefilling;
    state.dp_group = group;
    state.blocks = reserve;
    state.prefilled = state.kv_tokens = hit_tokens;
    state.chain_blocks = static_cast<int>(place.hits.size());
    state.chain_parent = place.hits.empty() ? 0 : place.hits.back();
    state.cached_blocks = place.hits;
    state.admit_order = next_admit_order_++;
    running_.emplace(state.admit_order, id);
    sequences_on_group_[group] += 1;
    load[group] += state.PrefillRemaining();
    const int chunk = ChunkFor(state, draft);
    AddEntry(draft, state, state.prefilled, chunk, /*is_prefill=*/true, chunk == state.PrefillRemaining());
    draft.mb.entries_by_group[group].back().shared_blocks = std::move(place.hits);
  }
}

}  // namespace seam::coordinator
