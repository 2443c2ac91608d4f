// The last stage's token choice: each sequence's sampling (SequenceSampling,
// which its first entry brings) and what its history asks of its logits
// (the prompt's tokens, the counts of the tokens it generated: penalties,
// logit_bias, min_tokens masks), turned into runtime::TokenChoice for each
// step; then the chosen tokens recorded and answered, with their log-probs
// where asked; plus the log-probs of given tokens for scoring. Owned by the
// stage actor; not thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <vector>

#include "absl/status/statusor.h"
#include "seam/core/tensor.h"
#include "seam/runtime/token_sampler.h"
#include "seam/v1/stage_service.pb.h"

namespace seam::server {

class SequenceSampler {
 public:
  // Whether any sequence of `d` asks for token log-probs (then the step must
  // return the logits of every token).
  static bool NeedsAllLogits(const v1::MicrobatchDescriptor& d);

  // Before the steps of `d` run: keeps the sampling an entry brings (a
  // sequence's first; one that comes again replaces it) and the tokens each
  // prefill entry feeds (the prompt's, and past the prompt those a
  // recomputed sequence had generated). INVALID_ARGUMENT names a sequence
  // that has no sampling.
  absl::Status Take(const v1::MicrobatchDescriptor& d);

  // The token choice of every sequence of `d` (input order): parameters, the
  // generation step (position past the prompt; step = the index of the
  // token chosen, 0 for the one after the prompt, as runtime::Generator
  // counts, so a seeded run replays the same tokens), the logit edits its
  // history asks for, its log-probs. `ahead`: the choices of decode step
  // `ahead` of a multi-step descriptor, without rewriting `d`.
  std::vector<runtime::TokenChoice> Choices(const v1::MicrobatchDescriptor& d, uint32_t ahead = 0) const;
  // Whether every sequence of `d` chooses from unedited logits without
  // log-probs at every step, so that its steps can be chosen on the device
  // ahead of the host (fed decode).
  bool Plain(const v1::MicrobatchDescriptor& d) const;

  // Records the tokens chosen for `d` (input order) into each sequence's
  // history and answers them; `logprobs` (may be empty) as ChooseTokens
  // gives them.
  std::vector<v1::SequenceResult> Results(const v1::MicrobatchDescriptor& d, const std::vector<int32_t>& tokens,
                                          const std::vector<runtime::TokenLogprobs>& logprobs = {});

  // The host path, for a step that returned logits (`logits[i]` belongs to
  // d.sequences(i): [tokens, vocab] when `all_logits`, else [1, vocab]):
  // chooses and records as Choices and Results do, and adds the log-probs
  // of each next given token when the entry asks (scoring).
  absl::StatusOr<std::vector<v1::SequenceResult>> Sample(const v1::MicrobatchDescriptor& d,
                                                         const std::vector<Tensor>& logits, bool all_logits);

  // Forgets a finished sequence.
  void Forget(uint64_t sequence) { sequences_.erase(sequence); }

 private:
  struct History {
    v1::SequenceSampling sampling;
    runtime::PenaltyRule rule;
    uint64_t prompt_end = 0;                   // position where the prompt ends
    std::set<int32_t> prompt_tokens;           // distinct (kept for repetition_penalty only)
    std::map<int32_t, int32_t> output_counts;  // generated tokens (kept for penalties only)
  };
  // The generation step of the token that follows `entry` (`ahead`
  // positions further on); 0 without a history.
  int32_t StepOf(const v1::SequenceEntry& entry, uint32_t ahead = 0) const;
  void Record(uint64_t sequence, int32_t token);
  // Records the token `entry` chose, unless the entry is a prefill chunk
  // that ends before the prompt does (chunked prefill): its token is not
  // generated and the coordinator drops it.
  void RecordChosen(const v1::SequenceEntry& entry, int32_t token);

  std::map<uint64_t, History> sequences_;
};

}  // namespace seam::server
