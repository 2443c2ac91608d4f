// The decisions of PlanStep, without ranks: placement only where the step
// names, rows and logits rows per DP group, cache needs and refusals, the
// graph bucket or why a step runs eagerly, the variant, the handoff check and
// what the step returns. Caches are real (small, on the host).
#include "seam/runtime/step_plan.h"

#include <gtest/gtest.h>

#include "seam/models/kv_cache.h"

namespace seam::runtime {
namespace {

using models::SequenceStep;

models::KvCacheOptions SmallCache(int64_t blocks) {
  models::KvCacheOptions o;
  o.block_size = 4;
  o.budget_bytes = blocks * 4 * 2 * 8 * sizeof(float);  // one layer, one KV head of 8: k and v
  return o;
}

struct Group {
  explicit Group(int tp, int attn_dp, int64_t blocks = 8) {
    facts.tp = tp;
    facts.attn_dp = attn_dp;
    facts.hidden_size = 8;
    for (int dp = 0; dp < attn_dp; ++dp) caches.push_back(*models::KvCache::Create(1, 1, 8, SmallCache(blocks)));
  }
  StepPlanState State() const {
    StepPlanState s;
    s.dp_of = &dp_of;
    for (const auto& c : caches) s.caches.push_back(c.get());
    return s;
  }
  absl::StatusOr<StepPlan> Plan(const std::vector<SequenceStep>& steps, bool all_logits = false,
                                const std::vector<boundary::PipelineTensors>* in = nullptr, size_t choices = 0) const {
    StepRequest r;
    r.sequences = &steps;
    r.all_logits = all_logits;
    r.choose_tokens = choices > 0;
    r.choices = choices;
    r.in = in;
    return PlanStep(r, facts, State());
  }
  StepPlanFacts facts;
  std::map<uint64_t, int> dp_of;
  std::vector<std::unique_ptr<models::KvCache>> caches;
};

SequenceStep On(uint64_t sequence, int tokens, int dp_group, int64_t start = 0) {
  return SequenceStep{sequence, std::vector<int32_t>(tokens, 1), start, dp_group};
}

TEST(StepPlan, SequencesGoWhereTheStepNamesWithRowsInInputOrder) {
  Group g(2, 2);
  auto plan = g.Plan({On(7, 5, 1), On(8, 3, 0), On(9, 2, 1)}, /*all_logits=*/true);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->dp_rows, (std::vector<int64_t>{3, 7}));
  ASSERT_EQ(plan->sequences.size(), 3u);
  EXPECT_EQ(plan->sequences[0].dp_group, 1);
  EXPECT_EQ(plan->sequences[2].row, 5);
  EXPECT_EQ(plan->sequences[2].logit_row, 5);
  EXPECT_TRUE(plan->sequences[0].placed_now);
  EXPECT_EQ(plan->dp_groups[1].members, (std::vector<size_t>{0, 2}));
  EXPECT_EQ(plan->dp_groups[1].blocks_needed, 3);  // 5 tokens: two blocks of 4; 2 tokens: one
  EXPECT_EQ(plan->output, StepOutput::kAllLogits);
  EXPECT_EQ(plan->ToString(),
            "3 sequences; dp 0: 3 rows [8*@0+3], 1 blocks, 0 state slots; dp 1: 7 rows [7*@0+5 9*@0+2], 3 blocks, "
            "0 state slots; eager (a prefill), ORDINARY; in none; out all_logits");
}

TEST(StepPlan, NoPlacementOfItsOwnWhereThereAreSeveralDpGroups) {
  Group g(2, 2);
  auto plan = g.Plan({On(1, 4, 0), On(2, 4, -1)});
  ASSERT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument) << plan.status();
  EXPECT_EQ(plan.status().message(),
            "sequence 2 names no DP group; this stage has 2 attention-DP groups and places a sequence only where "
            "the step names");
  Group one(1, 1);
  auto single = one.Plan({On(2, 4, -1)});
  ASSERT_TRUE(single.ok()) << single.status();
  EXPECT_EQ(single->sequences[0].dp_group, 0);
}

TEST(StepPlan, ASequenceStaysOnItsDpGroup) {
  Group g(2, 2);
  g.dp_of[1] = 0;
  auto moved = g.Plan({On(1, 1, 1, 4)});
  ASSERT_EQ(moved.status().code(), absl::StatusCode::kInvalidArgument) << moved.status();
  EXPECT_EQ(moved.status().message(), "sequence 1 lives on DP group 0; the step names DP group 1");
  auto outside = g.Plan({On(2, 1, 2)});
  ASSERT_EQ(outside.status().code(), absl::StatusCode::kInvalidArgument) << outside.status();
  EXPECT_EQ(outside.status().message(), "sequence 2: DP group 2 of a group with attention DP 2");
  auto stays = g.Plan({On(1, 1, 0, 4)});
  ASSERT_TRUE(stays.ok()) << stays.status();
  EXPECT_FALSE(stays->sequences[0].placed_now);
}

TEST(StepPlan, MalformedStepsAreRefusedByName) {
  Group g(1, 1);
  EXPECT_EQ(g.Plan({On(1, 2, 0), On(1, 1, 0)}).status().message(), "sequence 1 appears twice in one step");
  EXPECT_EQ(g.Plan({On(3, 0, 0)}).status().message(), "sequence 3 has no tokens in this step");
  auto choices = g.Plan({On(1, 2, 0)}, /*all_logits=*/true, nullptr, /*choices=*/1);
  EXPECT_EQ(choices.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(choices.status().message(),
            "token choices are for the last piece without all_logits, one per sequence: 1 for 1 sequences");
  std::vector<boundary::PipelineTensors> in(1);
  EXPECT_EQ(g.Plan({On(1, 2, 0)}, false, &in).status().message(), "this piece takes 0 handoffs, got 1");
}

TEST(StepPlan, AStepTheCacheCannotHoldIsRefusedAndNothingIsPlaced) {
  Group g(1, 1, /*blocks=*/2);
  auto plan = g.Plan({On(1, 9, 0)});  // three blocks of 4
  ASSERT_EQ(plan.status().code(), absl::StatusCode::kResourceExhausted) << plan.status();
  EXPECT_EQ(plan.status().message(), "KV cache full on DP group 0: the step needs 3 more blocks, 2 of 2 are free");
  StepPlanState unbounded = g.State();
  unbounded.bounded_by_caches = false;
  const std::vector<SequenceStep> steps{On(1, 9, 0)};
  StepRequest r;
  r.sequences = &steps;
  auto described = PlanStep(r, g.facts, unbounded);
  ASSERT_TRUE(described.ok()) << described.status();
  EXPECT_EQ(described->dp_groups[0].blocks_needed, 3);
}

TEST(StepPlan, DecodeStepsReplayTheSmallestBucketThatHoldsThem) {
  Group g(1, 1, /*blocks=*/16);
  g.facts.graph_buckets = {1, 2, 4, 8};
  g.facts.graph_max_context = 16;
  auto three = g.Plan({On(1, 1, 0, 3), On(2, 1, 0, 5), On(3, 1, 0, 7)}, false, nullptr, 3);
  ASSERT_TRUE(three.ok()) << three.status();
  EXPECT_EQ(three->execution, StepExecution::kGraph);
  EXPECT_EQ(three->bucket, 4);
  EXPECT_EQ(three->variant, boundary::BatchVariant::kOrdinary);
  EXPECT_EQ(three->output, StepOutput::kTokens);
  std::vector<SequenceStep> nine;
  for (int i = 0; i < 9; ++i) nine.push_back(On(10 + i, 1, 0));
  auto past = g.Plan(nine);
  ASSERT_TRUE(past.ok()) << past.status();
  EXPECT_EQ(past->execution, StepExecution::kEager);
  EXPECT_EQ(past->eager_reason, "9 sequences in a DP group, past the largest bucket 8");
  EXPECT_EQ(g.Plan({On(1, 3, 0)})->eager_reason, "a prefill");
  EXPECT_EQ(g.Plan({On(1, 1, 0, 16)})->eager_reason, "a context past the graphs' 16 tokens");
  g.facts.graph_off_reason = "the group computes on the host";
  EXPECT_EQ(g.Plan({On(1, 1, 0, 3)})->eager_reason, "graphs off: the group computes on the host");
}

// Steps holding prefill rows replay the smallest mixed graph whose rows
// and sequences hold every DP group's; the padding rows take a padding
// sequence, so a group that falls short of the rows needs fewer sequences
// than the graph takes.
TEST(StepPlan, PrefillStepsReplayTheSmallestMixedGraphThatHoldsThem) {
  Group g(1, 1, /*blocks=*/64);
  g.facts.graph_buckets = {1, 2, 4, 8};
  g.facts.graph_max_context = 64;
  g.facts.mixed_graph_rows = {16, 32};
  g.facts.mixed_graph_sequences = {4, 12};
  auto mixed = g.Plan({On(1, 9, 0), On(2, 1, 0, 5), On(3, 1, 0, 7)}, false, nullptr, 3);
  ASSERT_TRUE(mixed.ok()) << mixed.status();
  EXPECT_EQ(mixed->execution, StepExecution::kMixedGraph);
  EXPECT_EQ(mixed->bucket, 16);
  EXPECT_EQ(mixed->variant, boundary::BatchVariant::kOrdinary);
  EXPECT_NE(mixed->ToString().find("mixed graph of 16 rows"), std::string::npos) << mixed->ToString();
  // 4 sequences short of 16 rows leave none for the padding: the next graph.
  EXPECT_EQ(g.Plan({On(1, 9, 0), On(2, 1, 0), On(3, 1, 0), On(4, 1, 0)})->bucket, 32);
  // 4 sequences of exactly 16 rows need no padding sequence.
  auto exact = g.Plan({On(1, 13, 0), On(2, 1, 0), On(3, 1, 0), On(4, 1, 0)});
  EXPECT_EQ(exact->execution, StepExecution::kMixedGraph);
  EXPECT_EQ(exact->bucket, 16);
  auto past = g.Plan({On(1, 33, 0)});
  EXPECT_EQ(past->execution, StepExecution::kEager);
  EXPECT_EQ(past->eager_reason, "a prefill past the mixed graphs (the largest: 32 rows of 12 sequences per DP group)");
  EXPECT_EQ(g.Plan({On(1, 5, 0)}, /*all_logits=*/true)->eager_reason, "a prefill returning every token's logits");
  EXPECT_EQ(g.Plan({On(1, 5, 0, 60)})->eager_reason, "a context past the graphs' 64 tokens");
  // Decode-only steps keep the decode graphs.
  EXPECT_EQ(g.Plan({On(1, 1, 0, 3), On(2, 1, 0, 3)})->execution, StepExecution::kGraph);
}

// With attention DP every DP group pads to the same graph.
TEST(StepPlan, AMixedGraphHoldsEveryDpGroup) {
  Group g(2, 2, /*blocks=*/64);
  g.facts.graph_buckets = {1, 2, 4, 8};
  g.facts.graph_max_context = 64;
  g.facts.mixed_graph_rows = {16, 32};
  g.facts.mixed_graph_sequences = {4, 12};
  auto plan = g.Plan({On(1, 3, 0), On(2, 20, 1)});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->execution, StepExecution::kMixedGraph);
  EXPECT_EQ(plan->bucket, 32);
}

TEST(StepPlan, ANonFirstPieceChecksEveryRanksHandoffAndItsForm) {
  Group g(2, 1);
  g.facts.first_piece = false;
  g.facts.graph_buckets = {1, 2};
  g.facts.graph_max_context = 16;
  g.facts.graph_in_form = HandoffForm{boundary::StreamState::kPending, boundary::RowForm::kAttnTpSlice};
  std::vector<boundary::PipelineTensors> in(2);
  for (auto& t : in) {  // two decode rows over attention TP 2: one slice row on each rank
    t.state = boundary::StreamState::kPending;
    t.rows = boundary::RowForm::kAttnTpSlice;
    t.hidden = Tensor::Zeros({1, 8}, DType::kF32);
    t.residual = Tensor::Zeros({1, 8}, DType::kF32);
  }
  const std::vector<SequenceStep> two{On(1, 1, 0, 2), On(2, 1, 0, 5)};
  auto plan = g.Plan(two, false, &in);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->in, (HandoffForm{boundary::StreamState::kPending, boundary::RowForm::kAttnTpSlice}));
  EXPECT_EQ(plan->execution, StepExecution::kGraph);
  EXPECT_EQ(plan->bucket, 2);
  in[0].state = in[1].state = boundary::StreamState::kWritten;
  in[0].residual = in[1].residual = Tensor();
  auto written = g.Plan(two, false, &in);
  ASSERT_TRUE(written.ok()) << written.status();
  EXPECT_EQ(written->eager_reason, "a handoff in written/attn_tp_slice; the graphs take pending/attn_tp_slice");
  in[1].hidden = Tensor::Zeros({2, 8}, DType::kF32);
  auto wrong = g.Plan(two, false, &in);
  ASSERT_EQ(wrong.status().code(), absl::StatusCode::kInvalidArgument) << wrong.status();
  EXPECT_NE(wrong.status().message().find("rank 1 (dp 0, attn_tp 1)"), std::string::npos) << wrong.status();
}

TEST(StepPlan, TheVariantOfAnEagerStepFollowsTheChoice) {
  Group g(2, 1);  // attention TP 2: 3 rows do not divide
  auto plan = g.Plan({On(1, 3, 0)});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->variant, boundary::BatchVariant::kUnpadded);
  g.facts.variants.mode = boundary::VariantMode::kFixed;
  g.facts.variants.fixed = boundary::BatchVariant::kOrdinary;
  EXPECT_EQ(g.Plan({On(1, 3, 0)})->variant, boundary::BatchVariant::kOrdinary);
}

}  // namespace
}  // namespace seam::runtime
