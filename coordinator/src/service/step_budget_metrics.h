// The step time fit behind --itl-target-ms as Prometheus families, from the
// scheduler's figures as the driver last published them
// (PipelineDriver::Load::step_budget).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "prometheus/metric_family.h"
#include "seam/coordinator/scheduler_types.h"

namespace seam::coordinator {

// seam:step_time_model_samples (timed steps in the fit's window),
// seam:step_time_model_coefficient_seconds{term="intercept"|"prefill_step"|
// "prefill_token"|"decode_row"|"context_token"} (0 while there is no fit),
// seam:mixed_prefill_budget_tokens (prefill tokens the target last allowed
// a step with decode rows) and seam:step_time_predicted_seconds (the fit's
// time for the last such step as built). `labels` go on every series.
std::vector<prometheus::MetricFamily> StepBudgetFamilies(const StepBudgetStats& stats,
                                                         const std::vector<std::pair<std::string, std::string>>& labels);

}  // namespace seam::coordinator
