// The fused-or-grouped choice of the routed experts from fake timings
// (src/expert_path_choice.h): which path each timed row count keeps, ties,
// row counts that were not timed, the timed buckets and the process-wide
// cache per shape. No device.
#include "src/expert_path_choice.h"

#include <gtest/gtest.h>

#include <limits>

namespace seam::models::internal {
namespace {

ExpertPathTable Table(std::vector<ExpertPathTiming> t, double margin = ExpertPathTable::kDefaultTieMargin) {
  absl::StatusOr<ExpertPathTable> table = ExpertPathTable::FromTimings(std::move(t), margin);
  EXPECT_TRUE(table.ok()) << table.status();
  return table.ok() ? *table : ExpertPathTable();
}

TEST(ExpertPathChoice, KeepsTheFasterPerRowCount) {
  // LongCat-Flash's shape as measured: fused best at 1 row, grouped at 32.
  const ExpertPathTable t = Table({{32, 61.0, 43.0}, {1, 20.0, 30.0}, {8, 40.0, 39.5}});
  ASSERT_EQ(t.entries().size(), 3u);
  EXPECT_EQ(t.entries()[0].timing.rows, 1);  // ascending whatever the input order
  EXPECT_EQ(t.entries()[0].path, ExpertPath::kFused);
  EXPECT_EQ(t.entries()[1].path, ExpertPath::kFused);  // 39.5 vs 40: within the 10 % margin
  EXPECT_EQ(t.entries()[2].path, ExpertPath::kGrouped);
  EXPECT_EQ(t.For(1), ExpertPath::kFused);
  EXPECT_EQ(t.For(32), ExpertPath::kGrouped);
}

TEST(ExpertPathChoice, TiesAndTheMarginKeepFused) {
  EXPECT_EQ(Table({{4, 50.0, 50.0}}).For(4), ExpertPath::kFused);         // exact tie
  EXPECT_EQ(Table({{4, 50.0, 45.1}}).For(4), ExpertPath::kFused);         // 9.8 % faster: inside 10 %
  EXPECT_EQ(Table({{4, 50.0, 44.9}}).For(4), ExpertPath::kGrouped);       // 10.2 % faster
  EXPECT_EQ(Table({{4, 50.0, 49.9}}, 0.0).For(4), ExpertPath::kGrouped);  // no margin: any gain
  EXPECT_EQ(Table({{4, 50.0, 50.0}}, 0.0).For(4), ExpertPath::kFused);    // still a tie
}

TEST(ExpertPathChoice, UntimedRowsTakeTheNextTimedAboveElseTheLargest) {
  const ExpertPathTable t = Table({{1, 10, 20}, {4, 30, 20}, {16, 40, 60}, {64, 90, 50}});
  EXPECT_EQ(t.For(0), ExpertPath::kFused);     // below the smallest: the smallest's
  EXPECT_EQ(t.For(2), ExpertPath::kGrouped);   // 2 -> 4
  EXPECT_EQ(t.For(3), ExpertPath::kGrouped);   // 3 -> 4
  EXPECT_EQ(t.For(5), ExpertPath::kFused);     // 5 -> 16
  EXPECT_EQ(t.For(17), ExpertPath::kGrouped);  // 17 -> 64
  EXPECT_EQ(t.For(1000), ExpertPath::kGrouped);  // above the largest: the largest's
}

TEST(ExpertPathChoice, EmptyTableRunsFused) {
  const ExpertPathTable t;
  EXPECT_TRUE(t.empty());
  EXPECT_EQ(t.For(1), ExpertPath::kFused);
  EXPECT_EQ(t.For(512), ExpertPath::kFused);
  EXPECT_EQ(Table({}).For(8), ExpertPath::kFused);
}

TEST(ExpertPathChoice, RepeatedRowsKeepTheLastTiming) {
  EXPECT_EQ(Table({{8, 10, 20}, {8, 30, 20}}).For(8), ExpertPath::kGrouped);
  EXPECT_EQ(Table({{8, 10, 20}, {8, 30, 20}}).entries().size(), 1u);
}

TEST(ExpertPathChoice, RefusesBadTimingsByName) {
  for (const ExpertPathTiming& bad : {ExpertPathTiming{0, 1, 1}, ExpertPathTiming{2, -1, 1},
                                      ExpertPathTiming{2, 1, std::numeric_limits<double>::quiet_NaN()},
                                      ExpertPathTiming{2, std::numeric_limits<double>::infinity(), 1}}) {
    absl::StatusOr<ExpertPathTable> t = ExpertPathTable::FromTimings({bad});
    EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(t.status().message().find("bad timing"), std::string::npos) << t.status();
  }
  EXPECT_EQ(ExpertPathTable::FromTimings({}, 1.0).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ExpertPathTable::FromTimings({}, -0.1).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ExpertPathChoice, TableText) {
  EXPECT_EQ(Table({{1, 20.04, 30.0}, {32, 61.0, 43.0}}).ToString(),
            "rows 1: fused 20.0 us, grouped 30.0 us -> fused\nrows 32: fused 61.0 us, grouped 43.0 us -> grouped");
}

TEST(ExpertPathChoice, TimedBucketsCoverTheDecodeGraphBuckets) {
  EXPECT_EQ(TimedRowBuckets(0), std::vector<int64_t>{});
  EXPECT_EQ(TimedRowBuckets(1), std::vector<int64_t>{1});
  EXPECT_EQ(TimedRowBuckets(85), (std::vector<int64_t>{1, 2, 4, 8, 16, 32, 64, 85}));  // 1024 pairs at top-12
  EXPECT_EQ(TimedRowBuckets(128), (std::vector<int64_t>{1, 2, 4, 8, 16, 32, 64, 128}));
  EXPECT_EQ(TimedRowBuckets(int64_t{1} << 24),
            (std::vector<int64_t>{1, 2, 4, 8, 16, 32, 64, 128, 256, 512}));  // capped at kMaxTimedRows
}

TEST(ExpertPathChoice, CacheTimesEachShapeOnce) {
  ClearExpertPathTables();
  int timed = 0;
  auto time = [&]() -> absl::StatusOr<ExpertPathTable> {
    ++timed;
    return ExpertPathTable::FromTimings({{32, 61.0, 43.0}});
  };
  const ExpertShapeKey longcat{"bf16", 64, 6144, 2048, 12, 96, 1 << 20};
  ExpertShapeKey other = longcat;
  other.inter = 1024;  // another TP split
  for (int layer = 0; layer < 3; ++layer) {
    absl::StatusOr<ExpertPathTable> t = CachedExpertPathTable(longcat, time);
    ASSERT_TRUE(t.ok());
    EXPECT_EQ(t->For(32), ExpertPath::kGrouped);
  }
  EXPECT_EQ(timed, 1);
  ASSERT_TRUE(CachedExpertPathTable(other, time).ok());
  EXPECT_EQ(timed, 2);
  // A failed timing is returned and not kept: the next layer times again.
  ExpertShapeKey failing = longcat;
  failing.top_k = 8;
  auto fail = [&]() -> absl::StatusOr<ExpertPathTable> {
    ++timed;
    return absl::ResourceExhaustedError("out of memory");
  };
  EXPECT_EQ(CachedExpertPathTable(failing, fail).status().code(), absl::StatusCode::kResourceExhausted);
  ASSERT_TRUE(CachedExpertPathTable(failing, time).ok());
  EXPECT_EQ(timed, 4);
  ClearExpertPathTables();
}

}  // namespace
}  // namespace seam::models::internal
