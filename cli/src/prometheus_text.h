// The few lines of the Prometheus text exposition format that `seam bench
// load` reads from a stage's /metrics: `name{label="value",...} value
// [timestamp]`, comments (# HELP, # TYPE) and blank lines skipped. Not a
// general client: no exemplars, no OpenMetrics. Pure functions.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace seam::cli {

struct PrometheusSample {
  std::string name;  // e.g. "seam:stage_step_seconds_sum"
  std::vector<std::pair<std::string, std::string>> labels;  // in page order, values unescaped
  double value = 0;  // +Inf, -Inf and NaN as such

  // The value of label `key`, or "" when the sample has none.
  std::string Label(absl::string_view key) const;
};

// Every sample of `text`. INVALID_ARGUMENT naming the line (1-based) and
// what is wrong with it otherwise.
absl::StatusOr<std::vector<PrometheusSample>> ParsePrometheusText(absl::string_view text);

}  // namespace seam::cli
