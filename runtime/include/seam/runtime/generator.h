// Generator: the generation loop over a StageGroup. It prefills every prompt
// in one batch, then decodes one token per unfinished sequence per step,
// choosing tokens greedily or by seeded sampling; a sequence stops at
// max_new_tokens or at EOS and its KV blocks are freed when it stops (and on
// any error). It places prompt p on attention-DP group p mod attn_dp (the
// group places nothing itself). Uses the group from the calling thread; not
// thread-safe.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "seam/core/tensor.h"
#include "seam/kernels/ops.h"
#include "seam/runtime/stage_group.h"

namespace seam::runtime {

struct GenerationOptions {
  int max_new_tokens = 16;
  // temperature ≤ 0: greedy. Draws use kernels::Sample with steps = the
  // generation step (0 for the token after the prompt); prompt p draws with
  // seed seam::SequenceSeed(sampling.seed, p), as sequence p of a served
  // request does.
  kernels::SamplingParams sampling{0.0f, 0, 1.0f, 0};
  int64_t eos_token_id = -2;  // -2: the config's eos_token_id; -1: never stop early
  bool return_logits = false;  // keep each step's logits
  // Decode steps run as this many consecutive groups of ceil(n / groups)
  // sequences, as a pipeline of that many stages batches them (the
  // coordinator spreads decode over its microbatches in flight), so that a
  // reference run sees the served path's batch shapes.
  int decode_groups = 1;
};

struct GenerationResult {
  // Generated tokens per prompt (the EOS token included when it stopped one).
  std::vector<std::vector<int32_t>> tokens;
  // With return_logits: per prompt, the fp32 logits [1, vocab] each token was chosen from.
  std::vector<std::vector<Tensor>> logits;
};

class Generator {
 public:
  explicit Generator(StageGroup* group) : group_(group) {}
  // INVALID_ARGUMENT for an empty prompt or max_new_tokens < 0; errors of a
  // step are returned as they come (sequences of the call are freed first).
  absl::StatusOr<GenerationResult> Generate(const std::vector<std::vector<int32_t>>& prompts,
                                            const GenerationOptions& options);

 private:
  // The prompts' prefill in consecutive steps of whole prompts, each within
  // the group's max_step_tokens (a longer prompt alone); logits in order.
  absl::StatusOr<std::vector<Tensor>> PrefillInSteps(const std::vector<models::SequenceStep>& batch);
  // One step of batch[first, end), its logits appended to `logits`.
  absl::Status StepPart(const std::vector<models::SequenceStep>& batch, size_t first, size_t end,
                        std::vector<Tensor>& logits);
  // One step of `batch`, run as `groups` consecutive parts (decode_groups).
  absl::StatusOr<std::vector<Tensor>> StepInGroups(const std::vector<models::SequenceStep>& batch, int groups);

  StageGroup* group_;
  uint64_t next_sequence_ = 1;
};

}  // namespace seam::runtime
