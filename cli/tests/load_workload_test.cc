// The workloads of `seam bench load`: seeded, within their distributions,
// in the shapes prefix caching is measured with; arrivals and load points.
#include "load_workload.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "bench_load_setup.h"

namespace seam::cli {
namespace {

WorkloadOptions Options(const std::string& prompt, const std::string& output, int sessions = 50) {
  WorkloadOptions o;
  o.prompt = *ParseLengthDistribution(prompt);
  o.output = *ParseLengthDistribution(output);
  o.sessions = sessions;
  o.vocab = 1000;
  o.seed = 7;
  return o;
}

TEST(LoadWorkload, LengthDistributionsParseAndRefuseByName) {
  EXPECT_EQ(ParseLengthDistribution("128")->ToString(), "128");
  EXPECT_EQ(ParseLengthDistribution("uniform:64:1024")->ToString(), "uniform:64:1024");
  EXPECT_EQ(ParseLengthDistribution("longtail:200:4096")->ToString(), "longtail:200:4096");
  for (const char* bad : {"0", "uniform:9:8", "uniform:0:8", "longtail:5000:4096", "zipf:1:2", "12x", ""}) {
    const absl::StatusOr<LengthDistribution> d = ParseLengthDistribution(bad);
    EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(d.status().message().find(std::string("'") + bad + "'"), std::string::npos) << d.status();
  }
}

TEST(LoadWorkload, SameSeedSameRequests) {
  const Workload a = *GenerateWorkload(Options("uniform:4:40", "uniform:1:9"));
  const Workload b = *GenerateWorkload(Options("uniform:4:40", "uniform:1:9"));
  ASSERT_EQ(a.sessions.size(), 50u);
  for (size_t s = 0; s < a.sessions.size(); ++s) {
    EXPECT_EQ(a.sessions[s].turns[0].user, b.sessions[s].turns[0].user);
    EXPECT_EQ(a.sessions[s].turns[0].max_tokens, b.sessions[s].turns[0].max_tokens);
  }
  WorkloadOptions other = Options("uniform:4:40", "uniform:1:9");
  other.seed = 8;
  EXPECT_NE(GenerateWorkload(other)->sessions[0].turns[0].user, a.sessions[0].turns[0].user);
  // More sessions keep the first ones.
  const Workload more = *GenerateWorkload(Options("uniform:4:40", "uniform:1:9", 80));
  EXPECT_EQ(more.sessions[49].turns[0].user, a.sessions[49].turns[0].user);
}

TEST(LoadWorkload, LengthsAndTokensStayInTheirRanges) {
  const Workload w = *GenerateWorkload(Options("uniform:4:40", "uniform:2:9", 400));
  int64_t shortest = 1 << 30, longest = 0;
  for (const Session& s : w.sessions) {
    const Turn& t = s.turns[0];
    shortest = std::min<int64_t>(shortest, t.user.size());
    longest = std::max<int64_t>(longest, t.user.size());
    EXPECT_GE(t.max_tokens, 2);
    EXPECT_LE(t.max_tokens, 9);
    for (int32_t id : t.user) ASSERT_TRUE(id >= 2 && id < 1000) << id;  // never BOS (0) or EOS (1)
  }
  EXPECT_EQ(shortest, 4);
  EXPECT_EQ(longest, 40);
  EXPECT_EQ(w.requests(), 400);
}

TEST(LoadWorkload, LongTailHasItsMedianAndAFewLongRequests) {
  const Workload w = *GenerateWorkload(Options("longtail:100:2000", "1", 2001));
  std::vector<int64_t> lengths;
  for (const Session& s : w.sessions) lengths.push_back(static_cast<int64_t>(s.turns[0].user.size()));
  std::sort(lengths.begin(), lengths.end());
  EXPECT_GT(lengths[1000], 80);  // the median of 2001 draws of a log-normal with median 100
  EXPECT_LT(lengths[1000], 125);
  EXPECT_GT(lengths[1980], 500);  // its 99th percentile is about 10x the median
  EXPECT_LE(lengths.back(), 2000);
  EXPECT_GE(lengths.front(), 1);
}

TEST(LoadWorkload, SharedPrefixOpensEveryPromptThenAUniqueSuffix) {
  WorkloadOptions o = Options("8", "4", 5);
  ASSERT_TRUE(ParseWorkloadShape("shared-prefix:32", &o).ok());
  const Workload w = *GenerateWorkload(o);
  const std::vector<int32_t> prefix(w.sessions[0].turns[0].user.begin(), w.sessions[0].turns[0].user.begin() + 32);
  for (const Session& s : w.sessions) {
    ASSERT_EQ(s.turns[0].user.size(), 40u);
    EXPECT_TRUE(std::equal(prefix.begin(), prefix.end(), s.turns[0].user.begin()));
  }
  EXPECT_NE(std::vector<int32_t>(w.sessions[0].turns[0].user.begin() + 32, w.sessions[0].turns[0].user.end()),
            std::vector<int32_t>(w.sessions[1].turns[0].user.begin() + 32, w.sessions[1].turns[0].user.end()));
  EXPECT_EQ(w.prompt_tokens(), 5 * 40);
  EXPECT_EQ(WorkloadShapeName(o), "shared-prefix:32");
}

TEST(LoadWorkload, MultiTurnPromptsGrowByEveryEarlierTurnAndAnswer) {
  WorkloadOptions o = Options("128", "128", 64);
  ASSERT_TRUE(ParseWorkloadShape("multi-turn:8", &o).ok());
  const Workload w = *GenerateWorkload(o);
  ASSERT_EQ(w.sessions[0].turns.size(), 8u);
  EXPECT_EQ(w.sessions[0].PromptTokens(0), 128);
  EXPECT_EQ(w.sessions[0].PromptTokens(7), 7 * 256 + 128);
  EXPECT_EQ(w.requests(), 64 * 8);
  EXPECT_EQ(w.prompt_tokens(), 64 * (8 * 128 + 256 * (0 + 1 + 2 + 3 + 4 + 5 + 6 + 7)));
  EXPECT_EQ(w.output_tokens(), 64 * 8 * 128);
  EXPECT_EQ(w.longest_context(), 8 * 256);
}

TEST(LoadWorkload, ShapesAndWorkloadsRefuseByName) {
  WorkloadOptions o;
  for (const char* bad : {"shared-prefix", "shared-prefix:0", "multi-turn:x", "chat"}) {
    const absl::Status s = ParseWorkloadShape(bad, &o);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(s.message().find(bad), std::string::npos) << s;
  }
  o = Options("4", "4");
  o.vocab = 2;
  EXPECT_EQ(GenerateWorkload(o).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(LoadWorkload, PoissonArrivalsHaveTheirRate) {
  const std::vector<double> at = PoissonArrivals(4001, 20.0, 3);
  EXPECT_EQ(at.front(), 0);
  EXPECT_TRUE(std::is_sorted(at.begin(), at.end()));
  EXPECT_NEAR(at.back() / 4000, 1.0 / 20, 0.1 / 20);  // the mean gap, within 10%
  EXPECT_EQ(PoissonArrivals(4, 0, 3), std::vector<double>(4, 0.0));  // infinite rate: all at once
  EXPECT_EQ(PoissonArrivals(5, 2.0, 9), PoissonArrivals(5, 2.0, 9));
}

TEST(LoadWorkload, LoadPointsAndVariantsParseAndRefuseByName) {
  const std::vector<LoadPoint> points = *ParseLoadPoints("1,8", "0.5,inf", 16);
  ASSERT_EQ(points.size(), 4u);
  EXPECT_EQ(points[1].Label(), "concurrency 8");
  EXPECT_EQ(points[2].Label(), "rate 0.5/s");
  EXPECT_EQ(points[3].Label(), "rate inf");
  EXPECT_EQ((*ParseLoadPoints("", "", 16))[0].Label(), "concurrency 16");
  EXPECT_EQ(ParseLoadPoints("0", "", 1).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseLoadPoints("", "-1", 1).status().code(), absl::StatusCode::kInvalidArgument);

  const LoadVariant v = *ParseLoadVariant("steps1:coordinator:--decode-steps=1 stage:--run-ahead=0");
  EXPECT_EQ(v.label, "steps1");
  EXPECT_EQ(v.coordinator_args, std::vector<std::string>{"--decode-steps=1"});
  EXPECT_EQ(v.stage_args, std::vector<std::string>{"--run-ahead=0"});
  EXPECT_EQ(ParseLoadVariant("base")->label, "base");
  const absl::StatusOr<LoadVariant> bad = ParseLoadVariant("x:--decode-steps=1");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("stage:--flag=value"), std::string::npos);
}

}  // namespace
}  // namespace seam::cli
