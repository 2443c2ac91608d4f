// StepTimeModel: how long the stages take for one microbatch, learned online
// from the steps the coordinator has timed. A plain value: no clocks, no
// threads; its owner (the scheduler) feeds it samples and asks predictions.
//
// The fit is step_ms ≈ a + e·has_prefill + b·prefill_tokens + c·decode_rows +
// d·context_tokens (context_tokens: the KV positions the step's attention
// reads, summed over its entries; has_prefill: 1 for a step with prefill
// rows, which the stages run eagerly where a decode-only step replays a
// graph, a fixed cost of its own) by least squares over the last `window` samples, with every
// coefficient kept >= 0 (a step never gets faster for more work): the least
// squares fit over each subset of the terms, the best whose coefficients are
// all >= 0 (exact non-negative least squares for five terms). There is no fit
// (fit() empty) until min_samples are held and some window of them had at
// least 4 steps with prefill and not all of one size (else the term a
// budget of prefill is made from is barely told apart) and a finite solution. A window that cannot be fit
// (a run of decode-only steps) keeps the last fit, so that the first
// prefill after a lull is still budgeted.
#pragma once

#include <array>
#include <deque>
#include <optional>

#include "absl/status/status.h"

namespace seam::coordinator {

// What a step carries, as the model counts it.
struct StepFeatures {
  double has_prefill = 0;  // 1 when prefill_tokens > 0
  double prefill_tokens = 0;
  double decode_rows = 0;
  double context_tokens = 0;
};

// step_ms ≈ intercept_ms + prefill_step_ms·has_prefill +
// prefill_token_ms·prefill_tokens + decode_row_ms·decode_rows +
// context_token_ms·context_tokens; all >= 0.
struct StepTimeFit {
  double intercept_ms = 0;
  double prefill_step_ms = 0;
  double prefill_token_ms = 0;
  double decode_row_ms = 0;
  double context_token_ms = 0;

  double Predict(const StepFeatures& f) const {
    return intercept_ms + prefill_step_ms * f.has_prefill + prefill_token_ms * f.prefill_tokens + decode_row_ms * f.decode_rows +
           context_token_ms * f.context_tokens;
  }
};

class StepTimeModel {
 public:
  static constexpr int kDefaultWindow = 256;
  static constexpr int kDefaultMinSamples = 16;

  // window >= min_samples >= 5 (checked: a programming error otherwise).
  explicit StepTimeModel(int window = kDefaultWindow, int min_samples = kDefaultMinSamples);

  // Adds one timed step (the oldest leaves beyond the window) and refits.
  // INVALID_ARGUMENT, nothing changed: a negative or non-finite feature or time.
  absl::Status Add(const StepFeatures& features, double milliseconds);

  const std::optional<StepTimeFit>& fit() const { return fit_; }
  int samples() const { return static_cast<int>(samples_.size()); }

 private:
  static constexpr int kTerms = 5;  // intercept, has prefill, prefill tokens, decode rows, context tokens
  struct Sample {
    std::array<double, kTerms> x;
    double ms;
  };
  void Refit();

  int window_;
  int min_samples_;
  std::deque<Sample> samples_;
  std::optional<StepTimeFit> fit_;
};

}  // namespace seam::coordinator
