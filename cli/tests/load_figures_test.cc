// The figures of a load point from requests written by hand: throughput,
// latency percentiles, goodput, what HTTP chunks can and cannot show, and
// the report's JSON and chart.
#include <gtest/gtest.h>

#include <sstream>

#include "load_report.h"
#include "load_stats.h"

namespace seam::cli {
namespace {

// A gRPC request: submitted at `submit`, its first token `ttft` later, then
// one token every `gap` seconds until `tokens` tokens.
RequestRecord Streamed(double submit, double ttft, double gap, int tokens) {
  RequestRecord r;
  r.prompt_tokens = 10;
  r.max_tokens = tokens;
  r.submit_seconds = submit;
  for (int i = 0; i < tokens; ++i) r.answer.arrivals.push_back(TokenArrival{submit + ttft + i * gap, 1});
  r.answer.output_tokens = tokens;
  r.answer.token_ids.assign(static_cast<size_t>(tokens), 5);
  r.answer.end_seconds = r.answer.arrivals.back().seconds;
  return r;
}

TEST(LoadFigures, ThroughputAndPercentilesOfStreamedTokens) {
  std::vector<RequestRecord> records;
  for (int i = 0; i < 10; ++i) records.push_back(Streamed(0.5 * i, 0.1 * (i + 1), 0.01, 11));
  const LoadFigures f = SummarizeLoad(records, {});
  EXPECT_EQ(f.requests, 10);
  EXPECT_EQ(f.output_tokens, 110);
  EXPECT_EQ(f.prompt_tokens, 100);
  EXPECT_DOUBLE_EQ(f.duration_s, 4.5 + 1.0 + 0.1);  // first submit to the last token
  EXPECT_DOUBLE_EQ(f.output_tok_per_s, 110 / 5.6);
  EXPECT_EQ(f.timing, "token");
  ASSERT_TRUE(f.ttft_ms && f.itl_ms && f.tpot_ms);
  EXPECT_NEAR(f.ttft_ms->p50, 500, 1e-9);  // nearest rank: the 5th of 100, 200, ..., 1000 ms
  EXPECT_NEAR(f.ttft_ms->p90, 900, 1e-9);
  EXPECT_NEAR(f.ttft_ms->p99, 1000, 1e-9);
  EXPECT_EQ(f.itl_ms->samples, 100);
  EXPECT_NEAR(f.itl_ms->p99, 10, 1e-9);
  EXPECT_NEAR(f.tpot_ms->mean, 10, 1e-9);
  EXPECT_LE(f.e2e_ms.p50, f.e2e_ms.p90);
  EXPECT_LE(f.e2e_ms.p90, f.e2e_ms.p99);
  ASSERT_TRUE(f.good_requests.has_value());
  EXPECT_EQ(*f.good_requests, 10);  // no target: every request is good
}

TEST(LoadFigures, GoodputCountsRequestsWithinTheTarget) {
  std::vector<RequestRecord> records;
  for (int i = 0; i < 10; ++i) records.push_back(Streamed(0, 0.1 * (i + 1), i < 8 ? 0.01 : 0.05, 5));
  const LoadFigures f = SummarizeLoad(records, LatencyTarget{650, 20});  // TTFT <= 650 ms, TPOT <= 20 ms
  ASSERT_TRUE(f.good_requests.has_value());
  EXPECT_EQ(*f.good_requests, 6);
  EXPECT_DOUBLE_EQ(f.goodput_request_per_s, 6 / f.duration_s);
  EXPECT_DOUBLE_EQ(f.goodput_tok_per_s, 30 / f.duration_s);
}

TEST(LoadFigures, HttpChunksWithoutTextShowNoTokenTimes) {
  RequestRecord r;  // a model without tokenizer.json: no text chunk before the end
  r.max_tokens = r.answer.output_tokens = 8;
  r.answer.per_token = false;
  r.answer.end_seconds = 2;
  const LoadFigures none = SummarizeLoad({r}, LatencyTarget{100, 0});
  EXPECT_EQ(none.timing, "none");
  EXPECT_FALSE(none.ttft_ms || none.itl_ms || none.tpot_ms);
  EXPECT_FALSE(none.good_requests.has_value());  // a TTFT target cannot be checked
  EXPECT_DOUBLE_EQ(none.e2e_ms.p50, 2000);
  EXPECT_EQ(*SummarizeLoad({r}, {}).good_requests, 1);

  r.answer.arrivals = {{0.5, 1}, {0.9, 1}};  // two text chunks for eight tokens
  const LoadFigures chunks = SummarizeLoad({r}, {});
  EXPECT_EQ(chunks.timing, "chunk");
  EXPECT_NEAR(chunks.ttft_ms->p50, 500, 1e-9);
  EXPECT_NEAR(chunks.itl_ms->p50, 400, 1e-9);       // per chunk
  EXPECT_NEAR(chunks.tpot_ms->p50, 1500.0 / 7, 1e-9);  // first text to the end of the stream, per token
}

std::vector<LoadRow> TwoVariants() {
  std::vector<LoadRow> rows;
  for (const char* variant : {"base", "fast"}) {
    for (int c : {1, 4}) {
      LoadRow row;
      row.variant = variant;
      row.transport = "grpc";
      row.point.concurrency = c;
      const double gap = std::string(variant) == "base" ? 0.02 : 0.01;
      std::vector<RequestRecord> records;
      for (int i = 0; i < 4; ++i) records.push_back(Streamed(i * 0.1 / c, 0.05, gap, 6));
      row.figures = SummarizeLoad(records, {});
      row.ideal = IdealLoad{0.1, 0.04, 0.06, 0, 5, 1e9, 1e8};
      rows.push_back(row);
    }
  }
  return rows;
}

TEST(LoadFigures, RowsCompareWithTheFirstVariantAtTheSamePoint) {
  const std::vector<LoadRow> rows = TwoVariants();
  EXPECT_EQ(BaselineOf(rows, rows[3]), &rows[1]);
  const nlohmann::json j = LoadRowJson(rows, rows[3]);
  EXPECT_EQ(j["variant"], "fast");
  EXPECT_EQ(j["load"]["mode"], "closed");
  EXPECT_EQ(j["load"]["concurrency"], 4);
  EXPECT_EQ(j["requests"], 4);
  EXPECT_EQ(j["output_tokens"], 24);
  EXPECT_EQ(j["vs_first"]["variant"], "base");
  EXPECT_GT(j["vs_first"]["output_tok_per_s"].get<double>(), 1.0);
  EXPECT_NEAR(j["vs_first"]["itl_p99"].get<double>(), 0.5, 1e-9);
  EXPECT_DOUBLE_EQ(j["ideal"]["measured_over_ideal"].get<double>(), rows[3].figures.duration_s / 0.1);
  for (const char* key : {"ttft_ms", "itl_ms", "tpot_ms", "e2e_ms"}) {
    EXPECT_TRUE(j[key].contains("p99")) << key;
  }
  std::ostringstream table;
  PrintLoadTables(rows, table);
  EXPECT_NE(table.str().find("concurrency 4"), std::string::npos);
}

TEST(LoadFigures, ChartDrawsOneLinePerVariantAndNamesWhatItLeftOut) {
  std::vector<LoadRow> rows = TwoVariants();
  LoadRow blind = rows[0];
  blind.transport = "http";
  blind.figures.itl_ms.reset();
  rows.push_back(blind);
  const std::string svg = LoadChartSvg(rows, "a <title> & more");
  EXPECT_EQ(svg.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\"", 0), 0u);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
  size_t lines = 0;
  for (size_t at = 0; (at = svg.find("<polyline", at)) != std::string::npos; ++at) ++lines;
  EXPECT_EQ(lines, 2u);
  EXPECT_NE(svg.find("a &lt;title&gt; &amp; more"), std::string::npos);
  EXPECT_NE(svg.find("not charted (no ITL seen): base http concurrency 1"), std::string::npos);
}

}  // namespace
}  // namespace seam::cli
