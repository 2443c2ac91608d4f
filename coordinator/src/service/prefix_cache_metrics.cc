// Prefix cache metrics (see prefix_cache_metrics.h).
#include "service/prefix_cache_metrics.h"

#include "seam/metrics/snapshot_collector.h"

namespace seam::coordinator {

std::vector<prometheus::MetricFamily> PrefixCacheFamilies(const PrefixCacheStats& s,
                                                       const std::vector<std::pair<std::string, std::string>>& labels) {
  using prometheus::MetricType;
  const double queries = static_cast<double>(s.query_tokens);
  const double hits = static_cast<double>(s.hit_tokens);
  return {
      metrics::ValueFamily("seam:prefix_cache_queries_total", "Prompt tokens looked up in the prefix cache",
                           MetricType::Counter, {{labels, queries}}),
      metrics::ValueFamily("seam:prefix_cache_hits_total", "Prompt tokens found in the prefix cache (not computed)",
                           MetricType::Counter, {{labels, hits}}),
      metrics::ValueFamily("seam:prefix_cache_hit_rate", "Prefix cache hits over queries since start, in tokens",
                           MetricType::Gauge, {{labels, queries > 0 ? hits / queries : 0.0}}),
      metrics::ValueFamily("seam:prefix_cache_evictions_total", "Cached KV blocks evicted to make room",
                           MetricType::Counter, {{labels, static_cast<double>(s.evictions)}}),
      metrics::ValueFamily("seam:prefix_cache_waits_total",
                           "Requests held at admission for prompt blocks another sequence was computing",
                           MetricType::Counter, {{labels, static_cast<double>(s.waited_requests)}}),
      metrics::ValueFamily("seam:prefix_cache_blocks", "KV blocks in the prefix cache (mapped by sequences or not)",
                           MetricType::Gauge, {{labels, static_cast<double>(s.cached_blocks)}}),
  };
}

}  // namespace seam::coordinator
