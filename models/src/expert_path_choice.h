// Which grouped path a batch of routed experts runs on the device, fused
// (ExpertGateUpSilu + ExpertDown) or grouped (ExpertMatmul per projection and
// a separate SiLU-mul), chosen per batch row count from timings of both paths
// (RoutedExperts measures them at load under MoeExperts::kAuto on CUDA), and
// the process-wide cache of those choices per expert shape, so that every
// layer of one shape is timed once. Pure logic: timings in, a choice per row
// count out. Private to the models library.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace seam::models::internal {

enum class ExpertPath : uint8_t { kFused, kGrouped };
const char* ExpertPathName(ExpertPath path);  // "fused", "grouped"

// Both paths' device time for one batch of `rows` rows.
struct ExpertPathTiming {
  int64_t rows = 0;
  double fused_us = 0;
  double grouped_us = 0;
};

// The row counts timed for batches of up to `max_rows` rows: the powers of
// two 1, 2, 4, ... (the default decode graph buckets) up to
// min(max_rows, kMaxTimedRows), and that bound itself when it is not one.
inline constexpr int64_t kMaxTimedRows = 512;
std::vector<int64_t> TimedRowBuckets(int64_t max_rows);

// One choice per timed row count. Grouped is kept only where it took less
// than (1 - tie_margin) of fused's time: within the margin (a tie, or
// timing noise) the fused path stays, so processes timing the same shape
// separately (the stages of a pipeline) rarely split on a close call.
// A batch whose row count was not timed takes the choice of the smallest
// timed row count at or above it (a decode graph pads its batch up to its
// bucket the same way); above the largest timed count, the largest's
// choice. With no timings every batch runs fused.
class ExpertPathTable {
 public:
  static constexpr double kDefaultTieMargin = 0.10;
  struct Entry {
    ExpertPathTiming timing;
    ExpertPath path = ExpertPath::kFused;
  };

  ExpertPathTable() = default;
  // Timings in any order; a row count given twice keeps its last timing.
  // INVALID_ARGUMENT for rows < 1, a negative or non-finite time, or a
  // margin outside [0, 1).
  static absl::StatusOr<ExpertPathTable> FromTimings(std::vector<ExpertPathTiming> timings,
                                                     double tie_margin = kDefaultTieMargin);

  ExpertPath For(int64_t rows) const;
  const std::vector<Entry>& entries() const { return entries_; }  // ascending rows
  bool empty() const { return entries_.empty(); }
  // One line per timed row count: "rows 32: fused 61.2 us, grouped 43.5 us -> grouped".
  std::string ToString() const;

 private:
  std::vector<Entry> entries_;
};

// What identifies a shape's timings in the process: the compute dtype's
// name, the experts, hidden, expert FFN width on this rank, routes per row,
// the ids the router draws from and the largest grouped batch. Not the
// device: the TP ranks of a process (one GPU model) share the first one's
// timing, so they all run a batch the same way.
struct ExpertShapeKey {
  std::string dtype;
  int64_t experts = 0, hidden = 0, inter = 0, top_k = 0, route_ids = 0, max_rows = 0;
  std::string ToString() const;
  bool operator<(const ExpertShapeKey& o) const;
};

// The process-wide table per shape: `time` runs for the first layer of a
// shape (one caller at a time, the others wait for its table); its error is
// returned and nothing is kept, so a later layer times again.
absl::StatusOr<ExpertPathTable> CachedExpertPathTable(
    const ExpertShapeKey& key, const std::function<absl::StatusOr<ExpertPathTable>()>& time);
// Forgets every cached table (tests).
void ClearExpertPathTables();

}  // namespace seam::models::internal
