// The last stage's token choice: one token per sequence from its logits with
// the sequence's SamplingParams (temperature <= 0 greedy, otherwise a seeded
// kernels::Sample draw), plus the log-probs of given tokens for scoring.
// Owned by the stage actor; not thread-safe.
#pragma once

#include <cstdint>
#include <map>
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

  // `logits[i]` belongs to d.sequences(i): [tokens, vocab] when `all_logits`,
  // else [1, vocab]. A draw uses step = the index of the generated token in
  // its sequence's output (0 for the token after the prompt, as
  // runtime::Generator counts), so a seeded run replays the same tokens.
  absl::StatusOr<std::vector<v1::SequenceResult>> Sample(const v1::MicrobatchDescriptor& d,
                                                         const std::vector<Tensor>& logits, bool all_logits);

  // The token choice of every sequence of `d` (input order), for a step that
  // chooses tokens where the logits are (runtime::ChooseTokens); then
  // Results turns the chosen tokens into the answer. Call one of Choices
  // and Sample once per descriptor: each counts the sequences' steps.
  // `ahead`: the choices of decode step `ahead` of a multi-step descriptor
  // (each sequence `ahead` positions on), without rewriting `d`.
  std::vector<runtime::TokenChoice> Choices(const v1::MicrobatchDescriptor& d, uint32_t ahead = 0);
  static std::vector<v1::SequenceResult> Results(const v1::MicrobatchDescriptor& d, const std::vector<int32_t>& tokens);

  // Forgets a finished sequence.
  void Forget(uint64_t sequence) { prompt_end_.erase(sequence); }

 private:
  // The generation step of the token that follows `entry` (`ahead`
  // positions further on).
  int32_t StepOf(const v1::SequenceEntry& entry, uint32_t ahead = 0);

  std::map<uint64_t, uint64_t> prompt_end_;  // sequence -> tokens in its prompt
};

}  // namespace seam::server
