// Windowed non-negative least squares of step times (see step_time_model.h).
#include "step_time_model.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "seam/core/status.h"

namespace seam::coordinator {
namespace {

constexpr int kTerms = 5;
using Vec = std::array<double, kTerms>;
using Mat = std::array<Vec, kTerms>;

// Solves g[S,S]·x = h[S] for the terms in `mask` by Gaussian elimination with
// partial pivoting (g is scaled to a unit diagonal scale by the caller);
// false when the subset's columns are (nearly) dependent.
bool SolveSubset(const Mat& g, const Vec& h, unsigned mask, Vec& x) {
  int idx[kTerms];
  int n = 0;
  for (int t = 0; t < kTerms; ++t) {
    if (mask & (1u << t)) idx[n++] = t;
  }
  double a[kTerms][kTerms + 1];
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < n; ++j) a[i][j] = g[idx[i]][idx[j]];
    a[i][n] = h[idx[i]];
  }
  for (int col = 0; col < n; ++col) {
    int pivot = col;
    for (int r = col + 1; r < n; ++r) {
      if (std::fabs(a[r][col]) > std::fabs(a[pivot][col])) pivot = r;
    }
    // Columns are scaled to at most 1 in magnitude, so a diagonal of the
    // normal matrix is at most the sample count: 1e-9 of that is dependence.
    if (std::fabs(a[pivot][col]) < 1e-9) return false;
    for (int j = 0; j <= n; ++j) std::swap(a[col][j], a[pivot][j]);
    for (int r = 0; r < n; ++r) {
      if (r == col) continue;
      const double f = a[r][col] / a[col][col];
      for (int j = col; j <= n; ++j) a[r][j] -= f * a[col][j];
    }
  }
  x.fill(0.0);
  for (int i = 0; i < n; ++i) x[idx[i]] = a[i][n] / a[i][i];
  return true;
}

}  // namespace

StepTimeModel::StepTimeModel(int window, int min_samples) : window_(window), min_samples_(min_samples) {
  SEAM_CHECK(min_samples_ >= kTerms && window_ >= min_samples_);
}

absl::Status StepTimeModel::Add(const StepFeatures& f, double milliseconds) {
  if (f.has_prefill != (f.prefill_tokens > 0 ? 1.0 : 0.0)) {
    return absl::InvalidArgumentError(absl::StrCat("step time sample: has_prefill ", f.has_prefill,
                                                   " but prefill_tokens ", f.prefill_tokens));
  }
  for (double v : {f.prefill_tokens, f.decode_rows, f.context_tokens, milliseconds}) {
    if (!std::isfinite(v) || v < 0) {
      return absl::InvalidArgumentError(absl::StrCat("step time sample (prefill_tokens ", f.prefill_tokens,
                                                     ", decode_rows ", f.decode_rows, ", context_tokens ",
                                                     f.context_tokens, ", ", milliseconds,
                                                     " ms): every value must be finite and >= 0"));
    }
  }
  samples_.push_back(Sample{{1.0, f.has_prefill, f.prefill_tokens, f.decode_rows, f.context_tokens}, milliseconds});
  if (static_cast<int>(samples_.size()) > window_) samples_.pop_front();
  Refit();
  return absl::OkStatus();
}

void StepTimeModel::Refit() {
  if (static_cast<int>(samples_.size()) < min_samples_) return;
  Vec scale{};
  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  int with_prefill = 0;
  for (const Sample& s : samples_) {
    for (int t = 0; t < kTerms; ++t) scale[t] = std::max(scale[t], s.x[t]);
    lo = std::min(lo, s.x[2]);
    hi = std::max(hi, s.x[2]);
    with_prefill += s.x[2] > 0 ? 1 : 0;
  }
  // Too few steps with prefill, or all of one size: the window says little
  // or nothing of what a prefill token costs.
  if (!(hi > lo) || with_prefill < 4) return;
  // Each column scaled to at most 1 (a column of zeros stays zero: its
  // subsets are singular and skipped).
  for (double& s : scale) s = s > 0 ? s : 1.0;
  Mat g{};
  Vec h{};
  for (const Sample& s : samples_) {
    Vec x;
    for (int t = 0; t < kTerms; ++t) x[t] = s.x[t] / scale[t];
    for (int i = 0; i < kTerms; ++i) {
      h[i] += x[i] * s.ms;
      for (int j = 0; j < kTerms; ++j) g[i][j] += x[i] * x[j];
    }
  }
  double best_sse = std::numeric_limits<double>::infinity();
  Vec best{};
  for (unsigned mask = 1; mask < (1u << kTerms); ++mask) {
    Vec x;
    if (!SolveSubset(g, h, mask, x)) continue;
    bool feasible = true;
    for (int t = 0; t < kTerms; ++t) feasible = feasible && std::isfinite(x[t]) && x[t] >= 0;
    if (!feasible) continue;
    double sse = 0;
    for (const Sample& s : samples_) {
      double p = 0;
      for (int t = 0; t < kTerms; ++t) p += x[t] * s.x[t] / scale[t];
      sse += (p - s.ms) * (p - s.ms);
    }
    if (sse < best_sse) {
      best_sse = sse;
      best = x;
    }
  }
  if (!std::isfinite(best_sse)) return;
  StepTimeFit fit;
  fit.intercept_ms = best[0] / scale[0];
  fit.prefill_step_ms = best[1] / scale[1];
  fit.prefill_token_ms = best[2] / scale[2];
  fit.decode_row_ms = best[3] / scale[3];
  fit.context_token_ms = best[4] / scale[4];
  fit_ = fit;
}

}  // namespace seam::coordinator
