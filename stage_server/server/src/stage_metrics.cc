// The stage's instruments and its scrape-time status families.
#include "stage_metrics.h"

#include <string>

#include "seam/handoff/handoff_transport.h"
#include "seam/metrics/snapshot_collector.h"

namespace seam::server {

StepKind StepKindOf(const v1::MicrobatchDescriptor& d) {
  bool prefill = false, decode = false;
  for (const v1::SequenceEntry& s : d.sequences()) (s.is_prefill() ? prefill : decode) = true;
  if (prefill && decode) return StepKind::kMixed;
  return prefill ? StepKind::kPrefill : StepKind::kDecode;
}

const char* StepKindName(StepKind kind) {
  switch (kind) {
    case StepKind::kPrefill:
      return "prefill";
    case StepKind::kMixed:
      return "mixed";
    case StepKind::kDecode:
      break;
  }
  return "decode";
}

StageMetrics::StageMetrics(metrics::MetricsEndpoint& endpoint)
    : step_(prometheus::BuildHistogram()
                .Name("seam:stage_step_seconds")
                .Help("Compute of one microbatch step on this stage (StageGroup::StepPiece, every TP rank; a "
                      "fed decode step from when the step before it was answered), by what the step held: "
                      "kind=\"decode\" (decode rows only), \"prefill\" (prefill chunks only) or \"mixed\"")
                .Register(endpoint.registry())),
      handoff_seconds_(prometheus::BuildHistogram()
                           .Name("seam:stage_handoff_seconds")
                           .Help("Handoffs between pipeline stages: direction=\"send\" until the next stage has "
                                 "every tensor; direction=\"receive\" from the start of the wait to a verified "
                                 "handoff (includes the previous stage's compute)")
                           .Register(endpoint.registry())),
      handoff_bytes_(prometheus::BuildCounter()
                         .Name("seam:stage_handoff_bytes_total")
                         .Help("Tensor bytes of handoffs sent to the next stage or received from the previous one")
                         .Register(endpoint.registry())),
      steps_(prometheus::BuildCounter()
                 .Name("seam:stage_steps_total")
                 .Help("Steps of this stage by mode: graph (a CUDA graph replayed) or eager")
                 .Register(endpoint.registry())),
      collective_(prometheus::BuildHistogram()
                      .Name("seam:stage_collective_wait_seconds")
                      .Help("Per TP rank, the step's one Synchronize wait for its stream and collectives (a proxy "
                            "for collective time; near zero on CPU ranks, whose Gloo collectives are synchronous)")
                      .Register(endpoint.registry())) {
  endpoint.AddCollectable(std::make_shared<metrics::SnapshotCollector>([this] { return Collect(); }));
}

void StageMetrics::SetStatusSource(std::function<v1::StageStatus()> status) {
  std::lock_guard<std::mutex> lock(mu_);
  status_ = std::move(status);
}

StageMetrics::Rank StageMetrics::ForRank(int pp_rank, int tp_size) {
  const std::string pp = std::to_string(pp_rank);
  const auto step = [&](StepKind kind) {
    return &step_.Add({{"pp_rank", pp}, {"kind", StepKindName(kind)}}, metrics::StepTimeBuckets());
  };
  Rank r{{step(StepKind::kDecode), step(StepKind::kPrefill), step(StepKind::kMixed)},
         handoff_seconds_.Add({{"pp_rank", pp}, {"direction", "send"}}, metrics::StepTimeBuckets()),
         handoff_seconds_.Add({{"pp_rank", pp}, {"direction", "receive"}}, metrics::StepTimeBuckets()),
         handoff_bytes_.Add({{"pp_rank", pp}, {"direction", "send"}}),
         handoff_bytes_.Add({{"pp_rank", pp}, {"direction", "receive"}}),
         steps_.Add({{"pp_rank", pp}, {"mode", "graph"}}),
         steps_.Add({{"pp_rank", pp}, {"mode", "eager"}}),
         {}};
  for (int t = 0; t < tp_size; ++t) {
    r.collective.push_back(
        &collective_.Add({{"pp_rank", pp}, {"tp_rank", std::to_string(t)}}, metrics::StepTimeBuckets()));
  }
  return r;
}

std::vector<prometheus::MetricFamily> StageMetrics::Collect() const {
  v1::StageStatus s;
  {
    // Read under the lock: SetStatusSource(nullptr) returns only once no
    // scrape reads the actor any more.
    std::lock_guard<std::mutex> lock(mu_);
    if (!status_) return {};
    s = status_();
  }
  if (!s.has_config()) return {};  // no pipeline rank before Configure
  const std::string pp = std::to_string(s.config().pipeline_rank());
  using prometheus::MetricType;
  std::vector<std::pair<metrics::Labels, double>> usage;
  for (int dp = 0; dp < s.kv_free_blocks_size(); ++dp) {
    const double total = static_cast<double>(s.limits().kv_blocks_per_dp_group());
    const double used = total > 0 ? (total - static_cast<double>(s.kv_free_blocks(dp))) / total : 0.0;
    usage.push_back({{{"pp_rank", pp}, {"dp_group", std::to_string(dp)}}, used});
  }
  const v1::HandoffDrops& d = s.handoff_drops();
  auto drop = [&](const char* reason, uint64_t n) {
    return std::pair<metrics::Labels, double>{{{"pp_rank", pp}, {"reason", reason}}, static_cast<double>(n)};
  };
  // 1 for the transport each link uses now; links this stage lacks are left out.
  std::vector<std::pair<metrics::Labels, double>> transports;
  for (const auto& [direction, transport] : {std::pair{"receive", s.handoff_in()}, std::pair{"send", s.handoff_out()}}) {
    if (transport == v1::HANDOFF_TRANSPORT_UNSPECIFIED) continue;
    transports.push_back({{{"pp_rank", pp}, {"direction", direction}, {"transport", handoff::TransportName(transport)}},
                          1.0});
  }
  return {
      metrics::ValueFamily("seam:stage_handoff_transport",
                           "How handoffs travel to and from the neighbouring stages (cuda_ipc: GPU to GPU; host_ucx: "
                           "through host memory)",
                           MetricType::Gauge, transports),
      metrics::ValueFamily("seam:stage_microbatches_in_flight", "Microbatches queued or running on this stage",
                           MetricType::Gauge, {{{{"pp_rank", pp}}, static_cast<double>(s.microbatches_in_flight())}}),
      metrics::ValueFamily("seam:stage_kv_cache_usage_perc",
                           "Share of this stage's KV blocks in use per attention-DP group (0 to 1), after the last "
                           "microbatch",
                           MetricType::Gauge, usage),
      metrics::ValueFamily("seam:stage_handoff_drops_total",
                           "Data-plane messages this stage dropped, by reason", MetricType::Counter,
                           {drop("bad_mac", d.bad_mac()), drop("oversized", d.oversized()),
                            drop("malformed", d.malformed()), drop("unexpected_microbatch", d.unexpected_microbatch()),
                            drop("unknown_peer", d.unknown_peer()), drop("unknown_kind", d.unknown_kind()),
                            drop("bad_payload", d.bad_payload()), drop("stale_epoch", d.stale_epoch()),
                            drop("incomplete", d.incomplete())}),
  };
}

}  // namespace seam::server
