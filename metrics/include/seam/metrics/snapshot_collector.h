// SnapshotCollector: families whose values are read at scrape time from a
// snapshot (a status message, a thread-safe counter), for state that some
// other owner keeps and that would otherwise be copied into gauges on every
// change. The function runs on the exposer's thread.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <prometheus/collectable.h>
#include <prometheus/metric_family.h>

namespace seam::metrics {

using Labels = std::vector<std::pair<std::string, std::string>>;

class SnapshotCollector final : public prometheus::Collectable {
 public:
  explicit SnapshotCollector(std::function<std::vector<prometheus::MetricFamily>()> collect)
      : collect_(std::move(collect)) {}
  std::vector<prometheus::MetricFamily> Collect() const override { return collect_(); }

 private:
  std::function<std::vector<prometheus::MetricFamily>()> collect_;
};

// A family of gauges or counters (type), one sample per labels/value pair.
prometheus::MetricFamily ValueFamily(const std::string& name, const std::string& help, prometheus::MetricType type,
                                     const std::vector<std::pair<Labels, double>>& samples);

}  // namespace seam::metrics
