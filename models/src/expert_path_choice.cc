// ExpertPathTable and the process-wide cache of expert_path_choice.h.
#include "src/expert_path_choice.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <mutex>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace seam::models::internal {

const char* ExpertPathName(ExpertPath path) { return path == ExpertPath::kFused ? "fused" : "grouped"; }

std::vector<int64_t> TimedRowBuckets(int64_t max_rows) {
  const int64_t top = std::min(max_rows, kMaxTimedRows);
  std::vector<int64_t> rows;
  for (int64_t r = 1; r <= top; r *= 2) rows.push_back(r);
  if (top >= 1 && rows.back() != top) rows.push_back(top);
  return rows;
}

absl::StatusOr<ExpertPathTable> ExpertPathTable::FromTimings(std::vector<ExpertPathTiming> timings,
                                                             double tie_margin) {
  if (!(tie_margin >= 0 && tie_margin < 1)) {
    return absl::InvalidArgumentError(absl::StrCat("expert path table: tie margin ", tie_margin,
                                                   " outside [0, 1)"));
  }
  std::map<int64_t, ExpertPathTiming> by_rows;
  for (const ExpertPathTiming& t : timings) {
    if (t.rows < 1 || !std::isfinite(t.fused_us) || !std::isfinite(t.grouped_us) || t.fused_us < 0 ||
        t.grouped_us < 0) {
      return absl::InvalidArgumentError(absl::StrCat("expert path table: bad timing at ", t.rows, " rows (fused ",
                                                     t.fused_us, " us, grouped ", t.grouped_us, " us)"));
    }
    by_rows[t.rows] = t;
  }
  ExpertPathTable table;
  for (const auto& [rows, t] : by_rows) {
    const bool grouped = t.grouped_us < (1 - tie_margin) * t.fused_us;
    table.entries_.push_back({t, grouped ? ExpertPath::kGrouped : ExpertPath::kFused});
  }
  return table;
}

ExpertPath ExpertPathTable::For(int64_t rows) const {
  if (entries_.empty()) return ExpertPath::kFused;
  auto at = std::lower_bound(entries_.begin(), entries_.end(), rows,
                             [](const Entry& e, int64_t r) { return e.timing.rows < r; });
  return at == entries_.end() ? entries_.back().path : at->path;
}

std::string ExpertPathTable::ToString() const {
  std::string out;
  for (const Entry& e : entries_) {
    absl::StrAppendFormat(&out, "%srows %d: fused %.1f us, grouped %.1f us -> %s", out.empty() ? "" : "\n",
                          e.timing.rows, e.timing.fused_us, e.timing.grouped_us, ExpertPathName(e.path));
  }
  return out;
}

std::string ExpertShapeKey::ToString() const {
  return absl::StrCat(dtype, ", ", experts, " experts, hidden ", hidden,
                      ", expert FFN ", inter, ", top-", top_k, " of ", route_ids, " ids, up to ", max_rows, " rows");
}

bool ExpertShapeKey::operator<(const ExpertShapeKey& o) const {
  return std::tie(dtype, experts, hidden, inter, top_k, route_ids, max_rows) <
         std::tie(o.dtype, o.experts, o.hidden, o.inter, o.top_k, o.route_ids, o.max_rows);
}

namespace {

struct Tables {
  std::mutex mu;  // held while a shape is timed: one timing on the devices at a time
  std::map<ExpertShapeKey, ExpertPathTable> by_shape;
};

Tables& ProcessTables() {
  static Tables* tables = new Tables;  // never destroyed: used until exit
  return *tables;
}

}  // namespace

absl::StatusOr<ExpertPathTable> CachedExpertPathTable(
    const ExpertShapeKey& key, const std::function<absl::StatusOr<ExpertPathTable>()>& time) {
  Tables& t = ProcessTables();
  std::lock_guard<std::mutex> lock(t.mu);
  auto it = t.by_shape.find(key);
  if (it != t.by_shape.end()) return it->second;
  absl::StatusOr<ExpertPathTable> table = time();
  if (table.ok()) t.by_shape.emplace(key, *table);
  return table;
}

void ClearExpertPathTables() {
  Tables& t = ProcessTables();
  std::lock_guard<std::mutex> lock(t.mu);
  t.by_shape.clear();
}

}  // namespace seam::models::internal
