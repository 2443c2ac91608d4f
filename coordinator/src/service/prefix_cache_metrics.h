// The prefix cache's Prometheus families, from the scheduler's counters as
// the driver last published them (PipelineDriver::Load::prefix).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "prometheus/metric_family.h"
#include "seam/coordinator/scheduler_types.h"

namespace seam::coordinator {

// seam:prefix_cache_queries_total (prompt tokens looked up),
// seam:prefix_cache_hits_total (of them, tokens found cached),
// seam:prefix_cache_hit_rate (hits / queries since start, 0 before any),
// seam:prefix_cache_evictions_total (blocks),
// seam:prefix_cache_waits_total (requests held for blocks in flight) and seam:prefix_cache_blocks
// (cached blocks now, held by sequences or not).
// `labels` go on every series (the served model's name).
std::vector<prometheus::MetricFamily> PrefixCacheFamilies(const PrefixCacheStats& stats,
                                                       const std::vector<std::pair<std::string, std::string>>& labels);

}  // namespace seam::coordinator
