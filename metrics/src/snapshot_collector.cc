// Building families by hand for SnapshotCollector.
#include "seam/metrics/snapshot_collector.h"

#include <prometheus/client_metric.h>

namespace seam::metrics {

prometheus::MetricFamily ValueFamily(const std::string& name, const std::string& help, prometheus::MetricType type,
                                     const std::vector<std::pair<Labels, double>>& samples) {
  prometheus::MetricFamily family;
  family.name = name;
  family.help = help;
  family.type = type;
  for (const auto& [labels, value] : samples) {
    prometheus::ClientMetric m;
    for (const auto& [k, v] : labels) m.label.push_back(prometheus::ClientMetric::Label{k, v});
    if (type == prometheus::MetricType::Counter) {
      m.counter.value = value;
    } else {
      m.gauge.value = value;
    }
    family.metric.push_back(std::move(m));
  }
  return family;
}

}  // namespace seam::metrics
