// The scheduler's record of one live request: where it is in its life
// (queued, prefilling, decoding), its DP group, the KV blocks it holds and
// how many positions of KV the stages have written for it.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "seam/coordinator/scheduler_types.h"

namespace seam::coordinator {

enum class Phase { kQueued, kPrefilling, kDecoding };

struct RequestState {
  Request request;
  Phase phase = Phase::kQueued;
  int dp_group = -1;          // -1 while queued
  uint64_t admit_order = 0;   // admission counter; orders running sequences oldest first
  int blocks = 0;             // KV blocks held on dp_group, not counting cached ones
  // Prefix caching: the cached blocks the sequence maps (its first blocks:
  // hits at admission, then the prompt blocks it published), how many of its
  // prompt's full blocks are in the cache's chain, and the last of them.
  std::vector<uint64_t> cached_blocks;
  // The sequence's tokens (prompt, then each sampled one) while it takes part
  // in prefix caching (Request::cache_tokens); empty otherwise.
  std::vector<int32_t> cache_tokens;
  int chain_blocks = 0;
  uint64_t chain_parent = 0;
  // Tokens to prefill: the prompt, or prompt + generated after a preemption.
  int prefill_target = 0;
  int prefilled = 0;          // of prefill_target, completed
  int kv_tokens = 0;          // positions whose KV every stage has written
  int generated = 0;          // tokens sampled so far
  int32_t last_token = -1;    // the latest sampled token (fed by the next decode step)
  // Microbatches in flight that hold it (not yet completed or failed): one,
  // or two with SchedulerOptions::overlap_steps (a step built while the one
  // before it runs).
  int in_flight = 0;
  int ahead_tokens = 0;       // positions its in-flight entries compute (past kv_tokens)
  int ahead_samples = 0;      // tokens its in-flight entries sample
  // Its latest in-flight entry is a one-step entry that samples (a decode
  // step or a prompt's last chunk): the step after it may be built before it
  // ends, fed on the stage the token it chooses.
  bool feedable = false;
  bool cancelled = false;     // Cancel arrived while in flight
  bool waited = false;        // held at admission for blocks another sequence computed

  // Blocks of the sequence's table on the stages: its own and the cached ones it maps.
  int TableBlocks() const { return blocks + static_cast<int>(cached_blocks.size()); }
  // The position its next entry starts at: past the KV written and the
  // positions its in-flight entries compute.
  int NextPosition() const { return kv_tokens + ahead_tokens; }
  // Positions of KV the next `steps` decode steps need (the first writes
  // position NextPosition()).
  int DecodeKvTokens(int steps = 1) const { return NextPosition() + steps; }
  // Tokens this request may still generate.
  int TokensLeft() const { return request.max_new_tokens - generated; }
  // Tokens left past those its in-flight entries sample.
  int TokensLeftPastInFlight() const { return TokensLeft() - ahead_samples; }
  // Positions of KV reserved at admission: the prefill plus the first decode step.
  int AdmissionKvTokens() const { return prefill_target + 1; }
  int PrefillRemaining() const { return prefill_target - prefilled; }
};

// Records a sampled token: returns the finish reason when the request ends
// with it (a stop token once it has min_tokens tokens, or max_new_tokens reached).
std::optional<FinishReason> RecordSample(RequestState& state, int32_t token);

// Puts a preempted request back to the queued phase: its blocks are released
// by the caller; it will be prefilled again over prompt + generated tokens.
void ResetForRecompute(RequestState& state);

}  // namespace seam::coordinator
