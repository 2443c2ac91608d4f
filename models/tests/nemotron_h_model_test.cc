// NemotronHModel on one rank: prefill of mixed lengths in one batch, then
// decode steps that continue each sequence's conv and SSM state, must give
// the logits of running each whole sequence alone in one prefill; a sequence
// freed and started again starts from a zero state; any non-empty layer
// range loads as a pipeline piece.
#include <gtest/gtest.h>

#include "seam/models/nemotron_h_model.h"
#include "seam/testing/tiny_checkpoint.h"

namespace seam::models {
namespace {

struct Loaded {
  std::unique_ptr<weights::Checkpoint> checkpoint;
  std::unique_ptr<DecoderModel> model;
  std::unique_ptr<KvCache> cache;
};

Loaded Load() {
  Loaded l;
  auto ck = weights::Checkpoint::Open(seam::testing::TinyNemotronHCheckpointDir());
  EXPECT_TRUE(ck.ok()) << ck.status();
  l.checkpoint = std::move(*ck);
  auto topology = boundary::Topology::Make(1, 1, 0);
  auto model = LoadDecoderModel(*l.checkpoint, ModelOptions{*topology, boundary::ReductionPolicy::kAr});
  EXPECT_TRUE(model.ok()) << model.status();
  l.model = std::move(*model);
  KvCacheOptions o;
  o.max_state_sequences = 4;
  auto cache = l.model->MakeCache(o);
  EXPECT_TRUE(cache.ok()) << cache.status();
  l.cache = std::move(*cache);
  return l;
}

absl::StatusOr<Tensor> Step(Loaded& l, const std::vector<SequenceStep>& steps, bool all_logits) {
  int64_t rows = 0;
  for (const SequenceStep& s : steps) rows += static_cast<int64_t>(s.tokens.size());
  boundary::ForwardBatch batch(0, boundary::BatchVariant::kOrdinary, l.model->options().topology, {rows});
  return l.model->Forward(batch, StepInput{steps, all_logits}, *l.cache);
}

TEST(NemotronHModel, DecodeContinuesTheStateOfAMixedLengthPrefill) {
  Loaded l = Load();
  const int vocab = static_cast<int>(l.model->config().vocab_size);
  std::vector<std::vector<int32_t>> seqs = {seam::testing::PromptTokens(1, 11, vocab),
                                            seam::testing::PromptTokens(2, 3, vocab)};
  std::vector<SequenceStep> steps = {{1, seqs[0], 0}, {2, seqs[1], 0}};
  auto prefill = Step(l, steps, false);
  ASSERT_TRUE(prefill.ok()) << prefill.status();
  std::vector<std::vector<std::vector<float>>> decoded(2);  // per sequence, per step: logits
  for (int i = 0; i < 2; ++i) decoded[i].push_back(std::vector<float>(prefill->Rows(i, 1).ToFloats()));
  for (int k = 0; k < 3; ++k) {
    for (int i = 0; i < 2; ++i) {
      const std::vector<float>& last = decoded[i].back();
      const int32_t next = static_cast<int32_t>(std::max_element(last.begin(), last.end()) - last.begin());
      steps[i].start += static_cast<int64_t>(steps[i].tokens.size());
      steps[i].tokens = {next};
      seqs[i].push_back(next);
    }
    auto step = Step(l, steps, false);
    ASSERT_TRUE(step.ok()) << step.status();
    for (int i = 0; i < 2; ++i) decoded[i].push_back(step->Rows(i, 1).ToFloats());
  }
  // Each whole sequence alone, as a fresh sequence (ids 3, 4): every position's logits.
  for (int i = 0; i < 2; ++i) {
    auto whole = Step(l, {{static_cast<uint64_t>(3 + i), seqs[i], 0}}, true);
    ASSERT_TRUE(whole.ok()) << whole.status();
    const int64_t prompt = static_cast<int64_t>(seqs[i].size()) - 3;
    for (int k = 0; k < 4; ++k) {
      const Tensor want = whole->Rows(prompt - 1 + k, 1);
      const Tensor got = Tensor::FromFloats(decoded[i][k], want.shape());
      EXPECT_LE(seam::testing::MaxRelativeError(got, want), 1e-5) << "sequence " << i << " step " << k;
    }
  }
  // Freed sequences give their state slots back; a sequence started again starts from zero.
  const int64_t free_slots = l.cache->states()->free_slots();
  ASSERT_TRUE(l.cache->Free(1).ok());
  EXPECT_EQ(l.cache->states()->free_slots(), free_slots + 1);
  auto again = Step(l, {{1, std::vector<int32_t>(seqs[1].begin(), seqs[1].end()), 0}}, true);
  ASSERT_TRUE(again.ok()) << again.status();
  ASSERT_TRUE(l.cache->Free(3).ok());
  auto alone = Step(l, {{9, seqs[1], 0}}, true);
  ASSERT_TRUE(alone.ok()) << alone.status();
  EXPECT_EQ(again->ToFloats(), alone->ToFloats());
}

TEST(NemotronHModel, LoadsAnyNonEmptyLayerRange) {
  auto ck = weights::Checkpoint::Open(seam::testing::TinyNemotronHCheckpointDir());
  ASSERT_TRUE(ck.ok());
  auto topology = boundary::Topology::Make(1, 1, 0);
  auto head = NemotronHModel::Load(**ck, ModelOptions{*topology, boundary::ReductionPolicy::kAr, DType::kF32, 0, 3});
  ASSERT_TRUE(head.ok()) << head.status();  // a first piece of three layers
  EXPECT_FALSE((*head)->is_last_piece());
  auto empty = NemotronHModel::Load(**ck, ModelOptions{*topology, boundary::ReductionPolicy::kAr, DType::kF32, 3, 3});
  EXPECT_EQ(empty.status().code(), absl::StatusCode::kInvalidArgument) << empty.status();
}

}  // namespace
}  // namespace seam::models
