// SchedulerOptions::itl_target_ms: the step time fit the caller's timings
// feed (ObserveStepTime), and the prefill room it leaves a step that
// carries decode rows (TargetRoom, called from ChunkOf).
#include <algorithm>
#include <climits>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "scheduler_impl.h"

namespace seam::coordinator {
namespace {

StepFeatures FeaturesOfMicrobatch(const Microbatch& mb) {
  StepFeatures f;
  for (const auto& group : mb.entries_by_group) {
    for (const MicrobatchEntry& e : group) {
      (e.is_prefill ? f.prefill_tokens : f.decode_rows) += e.num_tokens;
      f.context_tokens += e.start_position + e.num_tokens;
    }
  }
  f.has_prefill = f.prefill_tokens > 0 ? 1 : 0;
  return f;
}

// Prefill tokens from position `start` that keep a step whose other work the
// fit predicts at `predicted_ms` within `target_ms`; INT_MAX when the fit
// charges nothing for prefill.
int TokensWithin(const StepTimeFit& fit, double target_ms, double predicted_ms, int start) {
  const double per_token = fit.prefill_token_ms + fit.context_token_ms;
  if (!(per_token > 0)) return INT_MAX;
  const double tokens = std::floor((target_ms - predicted_ms - fit.context_token_ms * start) / per_token);
  if (!(tokens > 0)) return 0;
  return tokens >= static_cast<double>(INT_MAX) ? INT_MAX : static_cast<int>(tokens);
}

}  // namespace

absl::Status SchedulerImpl::ObserveStepTime(uint64_t microbatch_id, double milliseconds) {
  auto it = in_flight_.find(microbatch_id);
  if (it == in_flight_.end()) {
    return absl::NotFoundError(absl::StrCat("microbatch ", microbatch_id, " is not in flight"));
  }
  if (!std::isfinite(milliseconds) || milliseconds < 0) {
    return absl::InvalidArgumentError(absl::StrCat("step time of microbatch ", microbatch_id, " is ", milliseconds,
                                                   " ms: it must be finite and >= 0"));
  }
  // A multi-step microbatch's time covers several steps of decode rows
  // only: not a step the target chooses prefill for.
  if (options_.itl_target_ms <= 0 || it->second.decode_steps > 1) return absl::OkStatus();
  return step_model_.Add(FeaturesOfMicrobatch(it->second), milliseconds);
}

StepBudgetStats SchedulerImpl::StepBudget() const {
  StepBudgetStats s;
  s.samples = step_model_.samples();
  if (const auto& fit = step_model_.fit()) {
    s.fitted = true;
    s.intercept_ms = fit->intercept_ms;
    s.prefill_step_ms = fit->prefill_step_ms;
    s.prefill_token_ms = fit->prefill_token_ms;
    s.decode_row_ms = fit->decode_row_ms;
    s.context_token_ms = fit->context_token_ms;
  }
  s.last_prefill_budget = last_prefill_budget_;
  s.last_predicted_ms = last_predicted_ms_;
  return s;
}

StepFeatures SchedulerImpl::FeaturesOf(const Draft& draft) {
  StepFeatures f;
  f.prefill_tokens = draft.prefill_tokens;
  f.decode_rows = draft.decode_rows;
  f.context_tokens = static_cast<double>(draft.context_tokens);
  f.has_prefill = draft.prefill_tokens > 0 ? 1 : 0;
  return f;
}

int SchedulerImpl::TargetRoom(int start, const Draft& draft) const {
  const std::optional<StepTimeFit>& fit = step_model_.fit();
  if (options_.itl_target_ms <= 0 || draft.decode_rows == 0 || !fit) return INT_MAX;
  StepFeatures with_prefill = FeaturesOf(draft);
  with_prefill.has_prefill = 1;  // the chunk makes it a step with prefill, if it was not
  const int room = TokensWithin(*fit, options_.itl_target_ms, fit->Predict(with_prefill), start);
  return std::max(room, kMinMixedPrefillTokens - draft.prefill_tokens);
}

void SchedulerImpl::NoteBudget(const Draft& draft) {
  const std::optional<StepTimeFit>& fit = step_model_.fit();
  if (options_.itl_target_ms <= 0 || draft.decode_rows == 0 || !fit) return;
  StepFeatures decode_only = FeaturesOfMicrobatch(draft.mb);
  for (const auto& group : draft.mb.entries_by_group) {
    for (const MicrobatchEntry& e : group) {
      if (e.is_prefill) decode_only.context_tokens -= e.start_position + e.num_tokens;
    }
  }
  decode_only.prefill_tokens = 0;
  decode_only.has_prefill = 1;  // what the budget is for
  last_prefill_budget_ =
      std::max(kMinMixedPrefillTokens, TokensWithin(*fit, options_.itl_target_ms, fit->Predict(decode_only), 0));
  last_predicted_ms_ = fit->Predict(FeaturesOf(draft));
}

}  // namespace seam::coordinator
