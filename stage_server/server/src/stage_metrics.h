// StageMetrics: what one seam-stage process exports on /metrics, all with a
// pp_rank label (and tp_rank where the value is a TP rank's own). Timings and
// byte counts are recorded by the MicrobatchRunner as it runs; the state a
// StageStatus already holds (microbatches in flight, handoff drops, KV
// usage) is read from the actor's status at each scrape. Thread-safe.
// Steps are timed by what they hold (StepKind, the `kind` label), so that a
// reader can split the stage's compute between prefill and decode.
#pragma once

#include <array>
#include <functional>
#include <mutex>
#include <vector>

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/histogram.h>

#include "seam/metrics/metrics_endpoint.h"
#include "seam/v1/stage_service.pb.h"

namespace seam::server {

// What one step of a microbatch holds: decode rows only, prefill chunks
// only, or both (a mixed step). The `kind` label of seam:stage_step_seconds.
enum class StepKind { kDecode = 0, kPrefill = 1, kMixed = 2 };
StepKind StepKindOf(const v1::MicrobatchDescriptor& d);  // by its entries' is_prefill
const char* StepKindName(StepKind kind);                 // "decode", "prefill", "mixed"

class StageMetrics {
 public:
  explicit StageMetrics(metrics::MetricsEndpoint& endpoint);
  // Where the scrape reads StageStatus from (the actor, once started).
  void SetStatusSource(std::function<v1::StageStatus()> status);

  // The instruments of one pipeline rank (references stay valid).
  struct Rank {
    std::array<prometheus::Histogram*, 3> step;  // by StepKind: the stage's compute of one microbatch step
    prometheus::Histogram& handoff_send;      // until the next stage has every tensor
    prometheus::Histogram& handoff_receive;   // waiting for and verifying the previous stage's handoff
    prometheus::Counter& handoff_bytes_sent;
    prometheus::Counter& handoff_bytes_received;
    prometheus::Counter& graph_replays;       // decode steps replayed from a CUDA graph
    prometheus::Counter& eager_steps;         // steps run eagerly
    std::vector<prometheus::Histogram*> collective;  // per TP rank: the step's Synchronize wait
  };
  Rank ForRank(int pp_rank, int tp_size);

 private:
  std::vector<prometheus::MetricFamily> Collect() const;

  prometheus::Family<prometheus::Histogram>& step_;
  prometheus::Family<prometheus::Histogram>& handoff_seconds_;
  prometheus::Family<prometheus::Counter>& handoff_bytes_;
  prometheus::Family<prometheus::Counter>& steps_;
  prometheus::Family<prometheus::Histogram>& collective_;
  mutable std::mutex mu_;
  std::function<v1::StageStatus()> status_;
};

}  // namespace seam::server
