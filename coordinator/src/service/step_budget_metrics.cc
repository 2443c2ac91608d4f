// Step time fit metrics (see step_budget_metrics.h).
#include "service/step_budget_metrics.h"

#include "seam/metrics/snapshot_collector.h"

namespace seam::coordinator {

std::vector<prometheus::MetricFamily> StepBudgetFamilies(const StepBudgetStats& s,
                                                         const std::vector<std::pair<std::string, std::string>>& labels) {
  using prometheus::MetricType;
  using Labels = std::vector<std::pair<std::string, std::string>>;
  const auto term = [&labels](const char* name) {
    Labels l = labels;
    l.emplace_back("term", name);
    return l;
  };
  return {
      metrics::ValueFamily("seam:step_time_model_samples", "Timed steps the step time fit is made from",
                           MetricType::Gauge, {{labels, static_cast<double>(s.samples)}}),
      metrics::ValueFamily("seam:step_time_model_coefficient_seconds",
                           "Step time fit: seconds per unit of each term (0 while there is no fit)", MetricType::Gauge,
                           {{term("intercept"), s.intercept_ms / 1e3},
                            {term("prefill_step"), s.prefill_step_ms / 1e3},
                            {term("prefill_token"), s.prefill_token_ms / 1e3},
                            {term("decode_row"), s.decode_row_ms / 1e3},
                            {term("context_token"), s.context_token_ms / 1e3}}),
      metrics::ValueFamily("seam:mixed_prefill_budget_tokens",
                           "Prefill tokens the ITL target last allowed a step with decode rows (0 before any)",
                           MetricType::Gauge, {{labels, static_cast<double>(s.last_prefill_budget)}}),
      metrics::ValueFamily("seam:step_time_predicted_seconds",
                           "The step time fit's prediction for the last step with decode rows it budgeted",
                           MetricType::Gauge, {{labels, s.last_predicted_ms / 1e3}}),
  };
}

}  // namespace seam::coordinator
