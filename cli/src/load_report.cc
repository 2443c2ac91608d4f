// load_report.h: the tables and the JSON of the rows.
#include "load_report.h"

#include <algorithm>

#include "absl/strings/str_format.h"

namespace seam::cli {
namespace {

using Json = nlohmann::json;

std::string Cell(double v, const char* format, bool present = true) {
  return present ? absl::StrFormat(format, v) : "-";
}

double Ratio(double a, double b) { return b > 0 ? a / b : 0; }

Json PercentilesJson(const std::optional<Percentiles>& p) {
  if (!p) return nullptr;
  return {{"p50", p->p50}, {"p90", p->p90}, {"p99", p->p99}, {"mean", p->mean}, {"samples", p->samples}};
}

Json PointJson(const LoadPoint& p) {
  if (p.mode == LoadPoint::Mode::kClosed) return {{"mode", "closed"}, {"concurrency", p.concurrency}};
  return {{"mode", "open"}, {"rate", p.rate > 0 ? Json(p.rate) : Json("inf")}};
}

Json IdealJson(const LoadRow& r) {
  if (!r.ideal) return nullptr;
  const IdealLoad& i = *r.ideal;
  return {{"seconds", i.seconds},
          {"prefill_seconds", i.prefill_seconds},
          {"decode_seconds", i.decode_seconds},
          {"idle_seconds", i.idle_seconds},
          {"decode_steps", i.decode_steps},
          {"prefill_flops_per_rank", i.prefill_flops},
          {"decode_bytes_per_rank", i.decode_bytes},
          {"output_tok_per_s", Ratio(static_cast<double>(r.figures.output_tokens), i.seconds)},
          {"measured_over_ideal", Ratio(r.figures.duration_s, i.seconds)}};
}

Json VersusJson(const std::vector<LoadRow>& rows, const LoadRow& r) {
  const LoadRow* base = BaselineOf(rows, r);
  if (base == nullptr) return nullptr;
  const LoadFigures &f = r.figures, &b = base->figures;
  Json out = {{"variant", base->variant},
              {"output_tok_per_s", Ratio(f.output_tok_per_s, b.output_tok_per_s)},
              {"e2e_p99", Ratio(f.e2e_ms.p99, b.e2e_ms.p99)}};
  out["ttft_p50"] = f.ttft_ms && b.ttft_ms ? Json(Ratio(f.ttft_ms->p50, b.ttft_ms->p50)) : Json(nullptr);
  out["itl_p99"] = f.itl_ms && b.itl_ms ? Json(Ratio(f.itl_ms->p99, b.itl_ms->p99)) : Json(nullptr);
  return out;
}

// One line per row and stage: its share of the row's wall time spent
// computing, its steps (CUDA graph replays among them) and the mean step.
void PrintStageTable(const std::vector<LoadRow>& rows, std::ostream& out) {
  if (std::none_of(rows.begin(), rows.end(), [](const LoadRow& r) { return !r.stages.empty(); })) return;
  const char* const kStages = "%-14s %-9s %-16s %-5s %s\n";
  out << "\n" << absl::StrFormat(kStages, "variant", "transport", "load", "stage", "busy share of wall s (steps)");
  for (const LoadRow& r : rows) {
    for (const StageBusy& s : r.stages) {
      out << absl::StrFormat(kStages, r.variant, r.transport, r.point.Label(), std::to_string(s.stage),
                             StageBusyCell(s));
    }
  }
}

}  // namespace

const LoadRow* BaselineOf(const std::vector<LoadRow>& rows, const LoadRow& row) {
  if (rows.empty()) return nullptr;
  const std::string& first = rows.front().variant;
  for (const LoadRow& r : rows) {
    if (r.variant == first && r.transport == row.transport && r.point.Label() == row.point.Label()) return &r;
  }
  return nullptr;
}

void PrintLoadTables(const std::vector<LoadRow>& rows, std::ostream& out) {
  const char* const kThroughput = "%-14s %-9s %-16s %8s %9s %11s %8s %9s %9s %12s %10s\n";
  out << absl::StrFormat(kThroughput, "variant", "transport", "load", "requests", "wall s", "out tok/s", "req/s",
                         "ideal s", "x ideal", "goodput r/s", "tok/s vs")
      << absl::StrFormat(kThroughput, "", "", "", "", "", "", "", "", "", "", "first");
  for (const LoadRow& r : rows) {
    const LoadFigures& f = r.figures;
    const LoadRow* base = BaselineOf(rows, r);
    out << absl::StrFormat(kThroughput, r.variant, r.transport, r.point.Label(), std::to_string(f.requests),
                           Cell(f.duration_s, "%.4g"), Cell(f.output_tok_per_s, "%.1f"), Cell(f.request_per_s, "%.2f"),
                           Cell(r.ideal ? r.ideal->seconds : 0, "%.4g", r.ideal.has_value()),
                           Cell(r.ideal ? Ratio(f.duration_s, r.ideal->seconds) : 0, "%.2f", r.ideal.has_value()),
                           Cell(f.goodput_request_per_s, "%.2f", f.good_requests.has_value()),
                           Cell(base ? Ratio(f.output_tok_per_s, base->figures.output_tok_per_s) : 0, "%.2f",
                                base != nullptr));
  }
  const char* const kLatency = "%-14s %-9s %-16s %-5s %24s %24s %17s %24s\n";
  out << "\n"
      << absl::StrFormat(kLatency, "variant", "transport", "load", "seen", "TTFT ms p50/p90/p99", "ITL ms p50/p90/p99",
                         "TPOT ms p50/p99", "E2E ms p50/p90/p99");
  const auto three = [](const std::optional<Percentiles>& p) {
    return p ? absl::StrFormat("%.1f/%.1f/%.1f", p->p50, p->p90, p->p99) : std::string("-");
  };
  for (const LoadRow& r : rows) {
    const LoadFigures& f = r.figures;
    const std::string tpot = f.tpot_ms ? absl::StrFormat("%.2f/%.2f", f.tpot_ms->p50, f.tpot_ms->p99) : "-";
    out << absl::StrFormat(kLatency, r.variant, r.transport, r.point.Label(), f.timing, three(f.ttft_ms),
                           three(f.itl_ms), tpot, three(f.e2e_ms));
  }
  PrintStageTable(rows, out);
}

Json LoadRowJson(const std::vector<LoadRow>& rows, const LoadRow& r) {
  const LoadFigures& f = r.figures;
  Json goodput = nullptr;
  if (f.good_requests) {
    goodput = {{"good_requests", *f.good_requests},
               {"request_per_s", f.goodput_request_per_s},
               {"output_tok_per_s", f.goodput_tok_per_s}};
  }
  Json stages = Json::array();
  for (const StageBusy& s : r.stages) stages.push_back(StageBusyJson(s));
  return {{"variant", r.variant},
          {"transport", r.transport},
          {"load", PointJson(r.point)},
          {"requests", f.requests},
          {"prompt_tokens", f.prompt_tokens},
          {"output_tokens", f.output_tokens},
          {"duration_s", f.duration_s},
          {"request_per_s", f.request_per_s},
          {"output_tok_per_s", f.output_tok_per_s},
          {"timing", f.timing},
          {"ttft_ms", PercentilesJson(f.ttft_ms)},
          {"itl_ms", PercentilesJson(f.itl_ms)},
          {"tpot_ms", PercentilesJson(f.tpot_ms)},
          {"e2e_ms", PercentilesJson(f.e2e_ms)},
          {"goodput", goodput},
          {"ideal", IdealJson(r)},
          {"vs_first", VersusJson(rows, r)},
          {"stages", stages}};
}

}  // namespace seam::cli
