// One load point of `seam bench load`: a workload's sessions sent through a
// transport, closed loop (a fixed number of sessions in flight, each
// starting when one ends) or open loop (sessions start at Poisson arrival
// times, however many are in flight). A session's turns go one after the
// other, each turn's prompt replaying the history (load_workload.h). The
// first failed request ends the point: every call in flight is cancelled and
// its error returned; every request has a deadline, so a run never hangs.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "load_transport.h"
#include "load_workload.h"

namespace seam::cli {

struct LoadPoint {
  enum class Mode { kClosed, kOpen };
  Mode mode = Mode::kClosed;
  int concurrency = 1;  // kClosed: sessions in flight
  double rate = 0;      // kOpen: sessions per second; 0: every session at once
  std::string Label() const;  // "concurrency 8", "rate 2.5/s", "rate inf"
};

// One request as the client saw it; times in seconds since the point began.
struct RequestRecord {
  int session = 0, turn = 0;
  int64_t prompt_tokens = 0, max_tokens = 0;
  double submit_seconds = 0;
  LoadAnswer answer;
};

struct LoadRunOptions {
  double request_timeout_s = 600;
  uint64_t arrival_seed = 1;         // kOpen: the Poisson arrivals' seed
  std::string id_prefix = "load";    // request ids: PREFIX-s<session>-t<turn>
  double progress_every_s = 10;      // a line on `progress` this often (0: never)
  std::ostream* progress = nullptr;  // e.g. &std::cerr
  // Every prompt token t becomes 2 + (t - 2 + token_shift) mod (vocab - 2):
  // a point served after others by the same target (another transport or
  // load point) then finds none of their prompts in its prefix cache, while
  // its lengths and its own shared prefixes stay the workload's.
  int64_t token_shift = 0;
};

// Every request of `workload` in (session, turn) order. The error of the
// first request that failed (its transport's message), or FAILED_PRECONDITION
// naming a request that made fewer tokens than its max_tokens.
absl::StatusOr<std::vector<RequestRecord>> RunLoadPoint(LoadTransport& transport, const Workload& workload,
                                                        const LoadPoint& point, const LoadRunOptions& options);

// Session s's arrival offsets at `point` (all 0 closed loop): the runner's
// and the ideal's (load_ideal.h) schedule.
std::vector<double> SessionArrivals(const Workload& workload, const LoadPoint& point, uint64_t seed);

}  // namespace seam::cli
