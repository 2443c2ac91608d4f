// Declaring stages into a layer stack: appends outside a stack, options a
// stage does not take and re-used declarations are refused; binding errors
// name their append; places (terminal, producer) follow the stack and its
// pipeline neighbours; unserved batch variants fail at forward time.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "seam/boundary/stream_ops.h"
#include "stage_fixture.h"

namespace seam::boundary::testing {
namespace {

using ::testing::HasSubstr;

Topology Tp2() { return *Topology::Make(2, 1, 0); }

TEST(LayerStackTest, AppendOutsideAStackIsRefused) {
  ASSERT_EQ(LayerStack::Current(), nullptr);
  NormParams norm = UnitNorm();
  auto appended = SEAM_APPEND_STAGES(0, StageItem{DeclareAttn(), &norm});
  EXPECT_EQ(appended.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(appended.status().message(),
            "append_stages needs an open layer stack; open a LayerStack around the layers' construction");
}

TEST(LayerStackTest, OptionAStageDoesNotTakeIsRefusedByName) {
  NormParams norm = UnitNorm();
  LayerStack stack(LayerStackOptions{Tp2()});
  StageOptions latent;
  latent.qkv_latent = [] {};
  auto ffn = SEAM_APPEND_STAGES(0, StageItem{DeclareFfn(), &norm, latent});
  EXPECT_EQ(ffn.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ffn.status().message(), "an ffn stage does not take the option qkv_latent (it takes only fusions)");
  EXPECT_TRUE(SEAM_APPEND_STAGES(0, StageItem{DeclareAttn(), &norm, latent}).ok());
  EXPECT_TRUE(stack.Close().ok());
}

TEST(LayerStackTest, DeclarationOfABoundBoundaryIsRefused) {
  NormParams norm = UnitNorm();
  LayerStack stack(LayerStackOptions{Tp2()});
  const int line = __LINE__ + 1;
  auto first = SEAM_APPEND_STAGES(0, StageItem{DeclareAttn(), &norm}, StageItem{DeclareFfn(), &norm});
  ASSERT_TRUE(first.ok()) << first.status();
  const StageDeclaration taken = (*first)[0]->declaration();
  ASSERT_TRUE(taken.place.bound);
  auto again = SEAM_APPEND_STAGES(1, StageItem{taken, &norm});
  EXPECT_EQ(again.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(again.status().message(),
            "declaration already has its place in a layer stack (layer_stack_test.cc:" + std::to_string(line) +
                ", append 1 of its layer stack); pass a fresh DeclareAttn() or DeclareFfn()");
  EXPECT_TRUE(stack.Close().ok());
}

TEST(LayerStackTest, BindingErrorNamesTheAppendItCameFrom) {
  NormParams norm = UnitNorm();
  LayerStack stack(LayerStackOptions{Tp2()});
  StageDeclaration local = DeclareAttn(AttnDeclOptions{ProducerReduction::kAlwaysPartial, false});
  local.readout_caps.reads_after_attn_tp_gather = true;
  const int line = __LINE__ + 1;
  ASSERT_TRUE(SEAM_APPEND_STAGES(0, StageItem{local, &norm}).ok());  // binds once its consumer is known
  auto bind = SEAM_APPEND_STAGES(0, StageItem{DeclareFfn(), &norm});
  EXPECT_EQ(bind.status().code(), absl::StatusCode::kInvalidArgument);
  const std::string message(bind.status().message());
  EXPECT_THAT(message, HasSubstr("cannot declare a read after that gather"));
  EXPECT_THAT(message, HasSubstr("layer_stack_test.cc:" + std::to_string(line) + ", append 1 of its layer stack"));
  EXPECT_THAT(message, ::testing::Not(HasSubstr("/")));
  (void)stack.Close();
}

TEST(LayerStackTest, LastStageIsTerminal) {
  auto layer = BuildOneLayer(Tp2());
  ASSERT_TRUE(layer.ok()) << layer.status();
  const StagePlace& attn = (*layer)->attn->declaration().place;
  const StagePlace& ffn = (*layer)->ffn->declaration().place;
  EXPECT_TRUE(attn.bound && ffn.bound);
  EXPECT_FALSE(attn.terminal);
  EXPECT_FALSE(attn.has_producer);
  EXPECT_TRUE(ffn.terminal);
  EXPECT_TRUE(ffn.has_producer);
  EXPECT_EQ(ffn.producer_kind, StageKind::kAttention);
  EXPECT_EQ(attn.index, 0);
  EXPECT_EQ(ffn.index, 1);
  EXPECT_THAT(ffn.source, HasSubstr("stage_fixture.cc:"));
  EXPECT_FALSE((*layer)->ffn->plan().Find(BatchVariant::kOrdinary)->final_read.empty());
  EXPECT_TRUE((*layer)->attn->plan().Find(BatchVariant::kOrdinary)->final_read.empty());
}

std::vector<StageDeclaration> AttnThenFfn(int) { return {DeclareAttn(), DeclareFfn()}; }

TEST(LayerStackTest, PipelineNeighboursComeFromStageFacts) {
  NormParams norm = UnitNorm();
  LayerStackOptions options{Tp2()};
  options.stage_facts = AttnThenFfn;
  options.first_layer = 2;
  options.end_layer = 4;
  options.total_layers = 6;
  LayerStack stack(options);
  std::vector<std::shared_ptr<StageBoundary>> stages;
  for (int layer = 2; layer < 4; ++layer) {
    auto b = SEAM_APPEND_STAGES(layer, StageItem{DeclareAttn(), &norm}, StageItem{DeclareFfn(), &norm});
    ASSERT_TRUE(b.ok()) << b.status();
    stages.insert(stages.end(), b->begin(), b->end());
  }
  ASSERT_TRUE(stack.Close().ok());
  const StagePlace& first = stages.front()->declaration().place;
  EXPECT_TRUE(first.has_producer) << "layer 1 (another rank) ends with an FFN";
  EXPECT_EQ(first.producer_kind, StageKind::kFfn);
  EXPECT_EQ(first.global_layer, 2);
  const StagePlace& last = stages.back()->declaration().place;
  EXPECT_FALSE(last.terminal) << "layer 4 (another rank) declares stages";
  EXPECT_EQ(last.global_layer, 3);
  EXPECT_TRUE(stages.back()->plan().Find(BatchVariant::kOrdinary)->final_read.empty());
}

TEST(LayerStackTest, LayerThatDiffersFromItsStageFactsIsRefused) {
  NormParams norm = UnitNorm();
  LayerStackOptions options{Tp2()};
  options.stage_facts = AttnThenFfn;
  options.end_layer = 2;
  LayerStack stack(options);
  auto b = SEAM_APPEND_STAGES(0, StageItem{DeclareAttn(), &norm});
  EXPECT_EQ(b.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(b.status().message()), HasSubstr("layer 0 declares 1 stages that differ from its stage facts"));
  EXPECT_TRUE(stack.Close().ok());
}

class UnservedVariant : public ::testing::TestWithParam<BatchVariant> {};

// Variants a topology with attention DP does not serve.
TEST_P(UnservedVariant, ForwardFailsWithUnimplemented) {
  auto t = *Topology::Make(2, 2, 0);
  auto layer = BuildOneLayer(t);
  ASSERT_TRUE(layer.ok());
  SelfComms self;
  ForwardBatch batch(1, GetParam(), t, {4, 2});
  batch.comms = self.comms();
  auto h = Start(batch, Rows(3, 4));
  ASSERT_TRUE(h.ok()) << h.status();
  auto x = (*layer)->attn->Prepare(*h, batch);
  EXPECT_EQ(x.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_EQ(x.status().message(),
            std::string("no stage boundary path for the active ") + BatchVariantName(GetParam()) + " batch");
}

INSTANTIATE_TEST_SUITE_P(WithAttentionDp, UnservedVariant,
                         ::testing::Values(BatchVariant::kUnpadded, BatchVariant::kContextParallel),
                         [](const auto& info) { return std::string(BatchVariantName(info.param)); });

TEST(LayerStackTest, ContextParallelMessageNamesTheVariant) {
  EXPECT_EQ(std::string(BatchVariantName(BatchVariant::kContextParallel)), "CONTEXT_PARALLEL");
}

}  // namespace
}  // namespace seam::boundary::testing
