// SchedulerOptions::itl_target_ms: the prefill a step with decode rows takes
// under a step time fit learned from the times reported to ObserveStepTime.
// The stages' time here is a known linear function of what a microbatch
// carries, so the fit is exact and each decision can be checked exactly.
#include <cmath>
#include <functional>
#include <limits>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "scheduler_driver.h"
#include "seam/coordinator/scheduler.h"

namespace seam::coordinator {
namespace {

using testing::SchedulerDriver;
using ::testing::HasSubstr;

struct Carried {
  int prefill = 0, rows = 0;
  int64_t context = 0;
};

Carried CarriedBy(const Microbatch& mb) {
  Carried c;
  for (const auto& group : mb.entries_by_group) {
    for (const MicrobatchEntry& e : group) {
      (e.is_prefill ? c.prefill : c.rows) += e.num_tokens;
      c.context += e.start_position + e.num_tokens;
    }
  }
  return c;
}

// The stages' step time, in ms: 1, 0.5 more with prefill (run eagerly),
// 0.01 per prefill token, 0.05 per decode row, 0.0001 per KV position read.
double StagesMs(const Microbatch& mb) {
  const Carried c = CarriedBy(mb);
  return 1.0 + (c.prefill > 0 ? 0.5 : 0.0) + 0.01 * c.prefill + 0.05 * c.rows + 1e-4 * static_cast<double>(c.context);
}

SchedulerOptions Serving(double itl_target_ms) {
  SchedulerOptions o;
  o.pipeline_stages = 1;
  o.kv_blocks_per_dp_group = 8192;
  o.block_size = 16;
  o.max_tokens_per_microbatch = 8192;
  o.chunked_prefill = true;
  o.prefill_chunk_tokens = 512;
  o.itl_target_ms = itl_target_ms;
  return o;
}

// Prompts of 100 to 1,500 tokens, 24 tokens generated each.
void SubmitOne(SchedulerDriver& d, const std::string& prefix, int i) {
  d.Submit(prefix + std::to_string(i), 100 + (i * 337) % 1400, 24);
}

// Next / ObserveStepTime / Complete until nothing is left, calling
// `check(mb, fitted)` for every microbatch (`fitted`: the fit existed when
// it was built). With `arrivals`, request i of them arrives before step
// 2·i, so new prompts keep meeting the decode rows of earlier ones.
void RunTimed(SchedulerDriver& d, const std::function<void(const Microbatch&, bool)>& check,
              int arrivals = 0, const std::string& prefix = "late") {
  for (int step = 0; step < 100000; ++step) {
    if (step % 2 == 0 && step / 2 < arrivals) SubmitOne(d, prefix, step / 2);
    const bool fitted = d.scheduler->StepBudget().fitted;
    std::optional<Microbatch> mb = d.scheduler->Next();
    if (!mb) {
      if (step / 2 < arrivals) continue;
      return;
    }
    check(*mb, fitted);
    ASSERT_TRUE(d.scheduler->ObserveStepTime(mb->id, StagesMs(*mb)).ok());
    d.Complete(*mb);
  }
  ADD_FAILURE() << "did not drain";
}

// A burst that all arrives together: its steps teach the fit (prefill-only
// steps, then mixed ones).
void Warm(SchedulerDriver& d) {
  for (int i = 0; i < 30; ++i) SubmitOne(d, "warm", i);
  RunTimed(d, [](const Microbatch&, bool) {});
  ASSERT_TRUE(d.scheduler->StepBudget().fitted);
}

TEST(SchedulerStepBudgetTest, AStepWithDecodeRowsStaysWithinTheTarget) {
  constexpr double kTarget = 6.0;  // under a 512-token chunk beside a dozen decode rows
  SchedulerDriver d(Serving(kTarget));
  Warm(d);
  int limited = 0, checked = 0;
  RunTimed(
      d,
      [&](const Microbatch& mb, bool fitted) {
        const Carried c = CarriedBy(mb);
        ASSERT_TRUE(fitted);
        if (c.rows == 0 || c.prefill == 0) return;
        ++checked;
        // The fit is exact (the times are linear in its terms), so the chosen
        // prefill keeps the step within the target, up to rounding in the sums.
        if (c.prefill > kMinMixedPrefillTokens) EXPECT_LE(StagesMs(mb), kTarget + 1e-9) << "microbatch " << mb.id;
        // A chunk cut short of 512 tokens with more of its prompt left: only the target cuts here.
        for (const MicrobatchEntry& e : mb.entries_by_group[0]) {
          if (e.is_prefill && !e.is_last_chunk && e.num_tokens < 512) ++limited;
        }
      },
      /*arrivals=*/40, "a");
  EXPECT_GT(checked, 20) << "the fit must exist early enough to decide most mixed steps";
  EXPECT_GT(limited, 0) << "the target must have cut some step's prefill";
  const StepBudgetStats s = d.scheduler->StepBudget();
  ASSERT_TRUE(s.fitted);
  EXPECT_NEAR(s.intercept_ms, 1.0, 1e-6);
  EXPECT_NEAR(s.prefill_step_ms, 0.5, 1e-6);
  EXPECT_NEAR(s.prefill_token_ms, 0.01, 1e-9);
  EXPECT_NEAR(s.decode_row_ms, 0.05, 1e-8);
  EXPECT_NEAR(s.context_token_ms, 1e-4, 1e-10);
  EXPECT_GT(s.last_prefill_budget, 0);
  EXPECT_LE(s.last_predicted_ms, kTarget + 1e-9);
  for (int i = 0; i < 40; ++i) EXPECT_EQ(d.TokensOf("a" + std::to_string(i)).size(), 24u);
}

// A step with no decode row is all prefill: it fills the chunk however long
// the fit predicts it takes.
TEST(SchedulerStepBudgetTest, WithoutDecodeRowsTheTargetDoesNotLimitPrefill) {
  SchedulerDriver d(Serving(2.0));
  Warm(d);
  d.Submit("long", 3000, 2);
  Microbatch mb = d.MustNext();
  const Carried c = CarriedBy(mb);
  EXPECT_EQ(c.rows, 0);
  EXPECT_EQ(c.prefill, 512);
  EXPECT_GT(StagesMs(mb), 2.0);
}

// A target below what the decode rows alone take still lets every mixed
// step carry kMinMixedPrefillTokens of prefill, so every prompt finishes.
TEST(SchedulerStepBudgetTest, PrefillAlwaysProgresses) {
  SchedulerDriver d(Serving(0.5));  // under the 1 ms every step takes
  Warm(d);
  int at_floor = 0;
  RunTimed(
      d,
      [&](const Microbatch& mb, bool) {
        const Carried c = CarriedBy(mb);
        if (c.rows == 0 || c.prefill == 0) return;
        EXPECT_LE(c.prefill, kMinMixedPrefillTokens) << "microbatch " << mb.id;
        at_floor += c.prefill == kMinMixedPrefillTokens ? 1 : 0;
      },
      /*arrivals=*/30, "a");
  EXPECT_GT(at_floor, 0);
  for (int i = 0; i < 30; ++i) EXPECT_EQ(d.TokensOf("a" + std::to_string(i)).size(), 24u);
  EXPECT_EQ(d.scheduler->StepBudget().last_prefill_budget, kMinMixedPrefillTokens);
}

// Until the fit exists, and within it, the row bounds apply: a generous
// target never raises a step's prefill above max_mixed_prefill_tokens.
TEST(SchedulerStepBudgetTest, TheRowBoundsStillApply) {
  SchedulerOptions o = Serving(1000.0);
  o.max_mixed_prefill_tokens = 100;
  SchedulerDriver d(o);
  bool saw_fit = false;
  RunTimed(
      d,
      [&](const Microbatch& mb, bool fitted) {
        saw_fit = saw_fit || fitted;
        const Carried c = CarriedBy(mb);
        if (c.rows > 0) EXPECT_LE(c.prefill, 100) << "microbatch " << mb.id;
      },
      /*arrivals=*/40, "a");
  EXPECT_TRUE(saw_fit);
}

// No times reported: no fit, and the mixed steps are what they are without
// the target.
TEST(SchedulerStepBudgetTest, WithoutAFitTheTargetChangesNothing) {
  SchedulerDriver with(Serving(0.5)), without(Serving(0));
  for (int i = 0; i < 20; ++i) {
    SubmitOne(with, "a", i);
    SubmitOne(without, "a", i);
  }
  for (int step = 0; step < 200; ++step) {
    std::optional<Microbatch> a = with.scheduler->Next(), b = without.scheduler->Next();
    ASSERT_EQ(a.has_value(), b.has_value());
    if (!a) break;
    EXPECT_EQ(CarriedBy(*a).prefill, CarriedBy(*b).prefill);
    EXPECT_EQ(a->num_tokens, b->num_tokens);
    with.Complete(*a);
    without.Complete(*b);
  }
  EXPECT_FALSE(with.scheduler->StepBudget().fitted);
}

TEST(SchedulerStepBudgetTest, CreateRefusesAnInvalidTarget) {
  for (double bad : {-1.0, std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity()}) {
    auto s = Scheduler::Create(Serving(bad));
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(s.status().message(), HasSubstr("itl_target_ms"));
  }
  SchedulerOptions whole = Serving(10.0);
  whole.chunked_prefill = false;
  auto s = Scheduler::Create(whole);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.status().message(), HasSubstr("needs chunked_prefill"));
}

TEST(SchedulerStepBudgetTest, ObserveStepTimeRefusesUnknownMicrobatchesAndBadTimes) {
  SchedulerDriver d(Serving(10.0));
  d.Submit("a", 10, 2);
  Microbatch mb = d.MustNext();
  EXPECT_EQ(d.scheduler->ObserveStepTime(mb.id + 1, 1.0).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(d.scheduler->ObserveStepTime(mb.id, -1.0).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(d.scheduler->ObserveStepTime(mb.id, std::nan("")).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(d.scheduler->ObserveStepTime(mb.id, 1.0).ok());
  EXPECT_EQ(d.scheduler->StepBudget().samples, 1);
  d.Complete(mb);
  EXPECT_EQ(d.scheduler->ObserveStepTime(mb.id, 1.0).code(), absl::StatusCode::kNotFound) << "no longer in flight";
}

}  // namespace
}  // namespace seam::coordinator
