// Where a load point's time went on each stage of a local pipeline: the
// stage's compute (seam:stage_step_seconds, one observation per microbatch
// step) and its step counts (seam:stage_steps_total by mode), read from the
// stage's /metrics before and after the point. Busy time over the point's
// wall time is the share the stage computed; the rest it waited (for the
// coordinator's next descriptor, a handoff, the scheduler). A scrape that
// fails leaves that stage's figures out with the error; it never fails the
// bench. Pure functions but ScrapeStageCounters (one HTTP(S) GET).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "prometheus_text.h"
#include "seam/security/credentials.h"

namespace seam::cli {

// Cumulative counts of one stage process at one scrape, summed over its
// series (a stage exports its own pipeline rank only).
struct StageCounters {
  struct Steps {
    double seconds = 0;  // _sum of seam:stage_step_seconds
    double count = 0;    // _count
  };
  Steps all;
  // By the step's `kind` label (prefill, decode, mixed) where the stage sets it.
  std::map<std::string, Steps> by_kind;
  double graph_steps = 0, eager_steps = 0;  // seam:stage_steps_total{mode="graph"|"eager"}
};

// The counters in a stage's page; NOT_FOUND when it has no
// seam:stage_step_seconds_sum or _count sample (a stage not yet configured).
absl::StatusOr<StageCounters> StageCountersOf(const std::vector<PrometheusSample>& samples);

// One stage over one load point.
struct StageBusy {
  int stage = 0;
  std::string error;  // non-empty: a scrape failed (or the counters went back); no figures
  double busy_s = 0;         // compute seconds during the point
  double busy_fraction = 0;  // busy_s / the point's wall time
  double mean_step_ms = 0;   // busy_s / steps
  int64_t steps = 0, graph_steps = 0, eager_steps = 0;
  struct Kind {
    double busy_s = 0, busy_fraction = 0;
    int64_t steps = 0;
  };
  std::map<std::string, Kind> by_kind;  // empty when the stage does not label its steps
};

// The difference of two scrapes of stage `stage` around a point of
// `duration_s` wall seconds; the first failed scrape's error otherwise.
StageBusy StageBusyBetween(int stage, const absl::StatusOr<StageCounters>& before,
                           const absl::StatusOr<StageCounters>& after, double duration_s);

// {"stage", "busy_s", "busy_fraction", "steps", "graph_steps",
// "eager_steps", "mean_step_ms", "by_kind", "error"}; figures null on error.
nlohmann::json StageBusyJson(const StageBusy& busy);

// "busy 0.93 (412 steps, 380 graph, 2.25 ms/step; decode 0.61, mixed 0.30)", or "n/a".
std::string StageBusyCell(const StageBusy& busy);

// GET https://ADDRESS/metrics (http:// without a CA in `security`), its
// body bounded to 4 MiB, parsed. UNAVAILABLE when it cannot be fetched,
// INTERNAL for a status other than 200, INVALID_ARGUMENT for a bad page.
absl::StatusOr<StageCounters> ScrapeStageCounters(const std::string& address,
                                                  const security::ClientSecurityOptions& security);

}  // namespace seam::cli
