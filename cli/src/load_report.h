// The report of `seam bench load`: one row per (variant, transport, load
// point) with its figures, its ideal and its ratios against the first
// variant's row of the same transport and point, printed as tables, written
// as JSON and charted as SVG (throughput against p99 ITL across the points).
#pragma once

#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "load_ideal.h"
#include "load_runner.h"
#include "load_stats.h"
#include "stage_busy.h"

namespace seam::cli {

struct LoadRow {
  std::string variant;    // the label of a --variant ("default" without one)
  std::string transport;  // "grpc" or "http"
  LoadPoint point;
  LoadFigures figures;
  std::optional<IdealLoad> ideal;  // absent when the peaks could not be measured
  std::vector<StageBusy> stages;   // each stage's busy time (none with --addr)
};

// The row of the first variant with the same transport and point, or null
// (the row itself for the first variant).
const LoadRow* BaselineOf(const std::vector<LoadRow>& rows, const LoadRow& row);

// Two tables: throughput against the ideal and the first variant, then the
// latency percentiles; a third of the stages' busy time where rows have it.
void PrintLoadTables(const std::vector<LoadRow>& rows, std::ostream& out);

// One row as JSON: its figures (null where not observable), ideal, ratios
// and `stages` (StageBusyJson of each).
nlohmann::json LoadRowJson(const std::vector<LoadRow>& rows, const LoadRow& row);

// The SVG chart: output tokens/s (y) against p99 ITL in ms (x), one line per
// variant and transport through its load points in order. Rows without an
// observable ITL are left out and named in a note under the chart.
std::string LoadChartSvg(const std::vector<LoadRow>& rows, const std::string& title);

}  // namespace seam::cli
