// The stages' busy time of `seam bench load` from pages written by hand:
// the exposition lines read, the counters summed, the differences around a
// load point, and a failed scrape reported rather than fatal.
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "load_report.h"
#include "prometheus_text.h"
#include "stage_busy.h"

namespace seam::cli {
namespace {

// A stage page as prometheus-cpp writes it, with `sum` seconds over `count`
// steps split over decode and prefill, and `graph` of them replayed.
std::string StagePage(double decode_s, int decode_steps, double prefill_s, int prefill_steps, int graph) {
  return absl::StrCat(
      "# HELP seam:stage_step_seconds Compute of one microbatch\n"
      "# TYPE seam:stage_step_seconds histogram\n"
      "seam:stage_step_seconds_count{kind=\"decode\",model_name=\"m\",pp_rank=\"1\"} ", decode_steps, "\n",
      "seam:stage_step_seconds_sum{kind=\"decode\",model_name=\"m\",pp_rank=\"1\"} ", decode_s, "\n",
      "seam:stage_step_seconds_bucket{kind=\"decode\",model_name=\"m\",pp_rank=\"1\",le=\"+Inf\"} ", decode_steps, "\n",
      "seam:stage_step_seconds_count{kind=\"prefill\",model_name=\"m\",pp_rank=\"1\"} ", prefill_steps, "\n",
      "seam:stage_step_seconds_sum{kind=\"prefill\",model_name=\"m\",pp_rank=\"1\"} ", prefill_s, "\n",
      "# TYPE seam:stage_steps_total counter\n"
      "seam:stage_steps_total{mode=\"graph\",model_name=\"m\",pp_rank=\"1\"} ", graph, "\n",
      "seam:stage_steps_total{mode=\"eager\",model_name=\"m\",pp_rank=\"1\"} ", decode_steps + prefill_steps - graph,
      "\n",
      "seam:stage_microbatches_in_flight{pp_rank=\"1\"} 0\n");
}

StageCounters Counters(const std::string& page) {
  absl::StatusOr<std::vector<PrometheusSample>> samples = ParsePrometheusText(page);
  EXPECT_TRUE(samples.ok()) << samples.status();
  absl::StatusOr<StageCounters> c = StageCountersOf(*samples);
  EXPECT_TRUE(c.ok()) << c.status();
  return *c;
}

TEST(PrometheusText, ReadsNamesLabelsEscapesValuesAndTimestamps) {
  absl::StatusOr<std::vector<PrometheusSample>> s = ParsePrometheusText(
      "# HELP x a help line { with } \"quotes\n\n"
      "plain 3\n"
      "  seam:a_total{path=\"/v1\\\"x\\\\y\\n\",code=\"200\",} 1.5e3 1700000000000\r\n"
      "h_bucket{le=\"+Inf\"} +Inf\n"
      "g{} -Inf\n"
      "n NaN");
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_EQ(s->size(), 5u);
  EXPECT_EQ((*s)[0].name, "plain");
  EXPECT_EQ((*s)[0].value, 3);
  EXPECT_TRUE((*s)[0].labels.empty());
  EXPECT_EQ((*s)[1].name, "seam:a_total");
  EXPECT_EQ((*s)[1].Label("path"), "/v1\"x\\y\n");
  EXPECT_EQ((*s)[1].Label("code"), "200");
  EXPECT_EQ((*s)[1].Label("absent"), "");
  EXPECT_EQ((*s)[1].value, 1500);
  EXPECT_EQ((*s)[2].Label("le"), "+Inf");
  EXPECT_TRUE(std::isinf((*s)[2].value) && (*s)[2].value > 0);
  EXPECT_TRUE(std::isinf((*s)[3].value) && (*s)[3].value < 0);
  EXPECT_TRUE(std::isnan((*s)[4].value));
}

TEST(PrometheusText, ABadLineIsRefusedWithItsNumber) {
  for (const auto& [page, why] : std::vector<std::pair<std::string, std::string>>{
           {"ok 1\nbad{a=\"1\" 2\n", "line 2: expected ',' or '}'"},
           {"ok 1\n\n{a=\"1\"} 2\n", "line 3: expected a metric name"},
           {"x{a=1} 2", "label a: expected =\""},
           {"x{a=\"1} 2", "label a: unterminated value"},
           {"x{a=\"\\t\"} 2", "unknown escape \\t"},
           {"x 1e400", "'1e400' is not a number"},
           {"x", "expected a space before the value"},
           {"x 1 soon", "'soon' after the value is not a timestamp"}}) {
    absl::StatusOr<std::vector<PrometheusSample>> s = ParsePrometheusText(page);
    ASSERT_FALSE(s.ok()) << page;
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument) << page;
    EXPECT_NE(s.status().message().find(why), std::string::npos) << page << ": " << s.status().message();
  }
}

TEST(StageBusy, CountersSumTheStepSeriesAndKeepEachKind) {
  const StageCounters c = Counters(StagePage(1.25, 40, 0.5, 2, 30));
  EXPECT_DOUBLE_EQ(c.all.seconds, 1.75);
  EXPECT_DOUBLE_EQ(c.all.count, 42);
  EXPECT_DOUBLE_EQ(c.by_kind.at("decode").seconds, 1.25);
  EXPECT_DOUBLE_EQ(c.by_kind.at("prefill").count, 2);
  EXPECT_EQ(c.by_kind.size(), 2u);
  EXPECT_DOUBLE_EQ(c.graph_steps, 30);
  EXPECT_DOUBLE_EQ(c.eager_steps, 12);
  // A page without the step histogram (a stage not yet configured) has no counters.
  absl::StatusOr<std::vector<PrometheusSample>> other = ParsePrometheusText("seam:stage_steps_total{mode=\"graph\"} 3");
  ASSERT_TRUE(other.ok());
  EXPECT_EQ(StageCountersOf(*other).status().code(), absl::StatusCode::kNotFound);
}

TEST(StageBusy, TheDifferenceAroundAPointOverItsWallTime) {
  // Before: 1.75 s over 42 steps; after: 3.75 s over 142 (1.5 s of decode
  // over 90 steps, 0.5 s of prefill over 10), 80 more replayed; wall 4 s.
  const StageBusy b = StageBusyBetween(1, Counters(StagePage(1.25, 40, 0.5, 2, 30)),
                                       Counters(StagePage(2.75, 130, 1.0, 12, 110)), 4.0);
  EXPECT_TRUE(b.error.empty()) << b.error;
  EXPECT_EQ(b.stage, 1);
  EXPECT_DOUBLE_EQ(b.busy_s, 2.0);
  EXPECT_EQ(b.steps, 100);
  EXPECT_EQ(b.graph_steps, 80);
  EXPECT_EQ(b.eager_steps, 20);
  EXPECT_DOUBLE_EQ(b.busy_fraction, 0.5);
  EXPECT_DOUBLE_EQ(b.mean_step_ms, 20);
  EXPECT_DOUBLE_EQ(b.by_kind.at("decode").busy_s, 1.5);
  EXPECT_EQ(b.by_kind.at("decode").steps, 90);
  EXPECT_DOUBLE_EQ(b.by_kind.at("decode").busy_fraction, 0.375);
  EXPECT_EQ(b.by_kind.at("prefill").steps, 10);
  EXPECT_EQ(StageBusyCell(b), "busy 0.50 (100 steps, 80 graph, 20 ms/step; decode 0.38, prefill 0.12)");
  const nlohmann::json j = StageBusyJson(b);
  EXPECT_EQ(j["stage"], 1);
  EXPECT_EQ(j["steps"], 100);
  EXPECT_EQ(j["graph_steps"], 80);
  EXPECT_DOUBLE_EQ(j["busy_s"].get<double>(), 2.0);
  EXPECT_DOUBLE_EQ(j["by_kind"]["prefill"]["busy_s"].get<double>(), 0.5);
  EXPECT_TRUE(j["error"].is_null());
}

TEST(StageBusy, AFailedScrapeIsReportedNotFatal) {
  const StageCounters ok = Counters(StagePage(1, 10, 0, 0, 0));
  const StageBusy before = StageBusyBetween(0, absl::UnavailableError("GET https://x/metrics: Connection"), ok, 1);
  EXPECT_EQ(before.error, "before the run: UNAVAILABLE: GET https://x/metrics: Connection");
  EXPECT_EQ(StageBusyCell(before), "n/a");
  const nlohmann::json j = StageBusyJson(before);
  EXPECT_TRUE(j["busy_s"].is_null());
  EXPECT_TRUE(j["steps"].is_null());
  EXPECT_EQ(j["error"], before.error);
  EXPECT_NE(StageBusyBetween(0, ok, absl::InternalError("HTTP 500"), 1).error.find("after the run: INTERNAL"),
            std::string::npos);
  // A stage that restarted between the scrapes: its counters went back.
  const StageBusy back = StageBusyBetween(0, Counters(StagePage(2, 20, 0, 0, 0)), ok, 1);
  EXPECT_NE(back.error.find("went back"), std::string::npos) << back.error;
}

TEST(StageBusy, TheReportCarriesEachRowsStages) {
  LoadRow row;
  row.variant = "default";
  row.transport = "grpc";
  row.figures.duration_s = 4;
  row.stages.push_back(StageBusyBetween(0, Counters(StagePage(0, 0, 0, 0, 0)), Counters(StagePage(1, 10, 0, 0, 0)),
                                        4));
  row.stages.push_back(StageBusyBetween(1, absl::UnavailableError("down"), Counters(StagePage(1, 10, 0, 0, 0)), 4));
  const std::vector<LoadRow> rows{row};
  const nlohmann::json j = LoadRowJson(rows, row);
  ASSERT_EQ(j["stages"].size(), 2u);
  EXPECT_DOUBLE_EQ(j["stages"][0]["busy_fraction"].get<double>(), 0.25);
  EXPECT_TRUE(j["stages"][1]["error"].is_string());
  std::ostringstream table;
  PrintLoadTables(rows, table);
  EXPECT_NE(table.str().find("busy 0.25 (10 steps, 0 graph, 100 ms/step; decode 0.25)"), std::string::npos)
      << table.str();
  EXPECT_NE(table.str().find("n/a"), std::string::npos) << table.str();
}

}  // namespace
}  // namespace seam::cli
