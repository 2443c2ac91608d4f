// Token choice where the logits are: one token per sequence from its logits
// row, on the logits' device, so that only token ids (and, when asked, a
// few log-probs) cross to the host. A row's logits may first be edited
// (penalties, logit_bias, min_tokens masks: kernels::EditLogits on a copy);
// rows whose sequences are greedy (temperature <= 0) and unedited are chosen
// together by one Argmax; every other row by kernels::Sample with its own
// parameters and generation step, drawing exactly what the host would (the
// CUDA kernels reproduce the CPU's order of operations). Log-probs come
// from the unedited logits (the model's own distribution, before penalties,
// biases and temperature). Stateless; any thread.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "seam/core/tensor.h"
#include "seam/kernels/ops.h"

namespace seam::runtime {

// One edit of one logit before the choice (kernels::EditLogits's order):
// repetition (1: none), then + offset (-inf masks the token).
struct LogitEdit {
  int32_t token = 0;
  float repetition = 1.0f;
  float offset = 0.0f;
};

struct TokenChoice {
  kernels::SamplingParams params;  // temperature <= 0: greedy
  int32_t step = 0;                // the sequence's generation step (seeds the draw)
  std::vector<LogitEdit> edits;    // distinct tokens
  bool logprobs = false;           // return the chosen token's log-prob
  int32_t top_logprobs = 0;        // and those of the most likely tokens
};

// The log-probs of one choice (TokenChoice::logprobs), most likely first.
struct TokenLogprobs {
  float chosen = 0.0f;
  std::vector<std::pair<int32_t, float>> top;
};

// `logits` f32 [S, vocab] on any device, one row per entry of `choices`.
// Returns the S chosen token ids on the host; `logprobs` (may be null:
// then none are computed) gets one entry per choice, empty where not asked.
// INVALID_ARGUMENT when the counts differ or top_logprobs is outside
// [0, vocab]; a kernel's error otherwise.
absl::StatusOr<std::vector<int32_t>> ChooseTokens(const Tensor& logits, const std::vector<TokenChoice>& choices,
                                                  std::vector<TokenLogprobs>* logprobs = nullptr);

// What a sequence's history asks of its logits before a choice, as OpenAI
// and vLLM define the parameters: each generated token's logit less
// presence once and frequency per occurrence; repetition r (1: none) for
// every token of the prompt or the output (a positive logit divided by r,
// a negative one multiplied); `bias` added; `masked` tokens at -inf while
// fewer than min_tokens were generated. Offsets sum in fp32 in that order
// (bias, - frequency · count, - presence).
struct PenaltyRule {
  float presence = 0.0f;
  float frequency = 0.0f;
  float repetition = 1.0f;
  std::vector<std::pair<int32_t, float>> bias;
  int32_t min_tokens = 0;
  std::vector<int32_t> masked;
};

// The edits of a choice under `rule`, given the counts of the tokens the
// sequence generated, the distinct tokens of its prompt, and how many it
// generated before this choice. Sorted by token; each token once.
std::vector<LogitEdit> PenaltyEdits(const PenaltyRule& rule, const std::map<int32_t, int32_t>& output_counts,
                                    const std::set<int32_t>& prompt_tokens, int64_t generated);

}  // namespace seam::runtime
