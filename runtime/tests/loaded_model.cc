#include "loaded_model.h"

#include <gtest/gtest.h>

#include "seam/boundary/forward_batch.h"
#include "seam/core/status.h"
#include "seam/kernels/stream.h"
#include "seam/testing/tiny_checkpoint.h"

namespace seam::runtime::model_testing {

LoadedModel LoadWholeModel(const std::string& checkpoint_dir, DType dtype, Device device,
                           kernels::ScanAlgorithm scan) {
  LoadedModel l;
  auto checkpoint = weights::Checkpoint::Open(checkpoint_dir);
  EXPECT_TRUE(checkpoint.ok()) << checkpoint.status();
  if (!checkpoint.ok()) return l;
  l.checkpoint = std::move(*checkpoint);
  auto topology = boundary::Topology::Make(1, 1, 0);
  models::ModelOptions options{*topology, boundary::ReductionPolicy::kAr, dtype};
  options.device = device;
  options.mamba_scan = scan;
  auto model = models::LoadDecoderModel(*l.checkpoint, options);
  EXPECT_TRUE(model.ok()) << model.status();
  if (!model.ok()) return l;
  models::KvCacheOptions cache_options;
  cache_options.dtype = dtype;
  auto cache = (*model)->MakeCache(cache_options);
  EXPECT_TRUE(cache.ok()) << cache.status();
  if (!cache.ok()) return l;
  l.model = std::move(*model);
  l.cache = std::move(*cache);
  return l;
}

absl::StatusOr<Tensor> ForwardToHost(LoadedModel& l, const models::StepInput& input) {
  int64_t rows = 0;
  for (const models::SequenceStep& s : input.sequences) rows += static_cast<int64_t>(s.tokens.size());
  boundary::ForwardBatch batch(1, boundary::BatchVariant::kOrdinary, l.model->options().topology, {rows});
  SEAM_ASSIGN_OR_RETURN(Tensor logits, l.model->Forward(batch, input, *l.cache));
  return logits.To(Device::CPU());
}

void ExpectPrefillAndDecodeMatch(LoadedModel& reference, LoadedModel& model, double tolerance, bool late_joiner) {
  ASSERT_NE(reference.model, nullptr);
  ASSERT_NE(model.model, nullptr);
  const std::vector<int> lengths{7, 1, 30};
  models::StepInput prefill{{}, true};
  for (size_t i = 0; i < lengths.size(); ++i) {
    prefill.sequences.push_back(
        models::SequenceStep{i, seam::testing::PromptTokens(40 + i, lengths[i], 128), 0});
  }
  auto want = ForwardToHost(reference, prefill);
  auto got = ForwardToHost(model, prefill);
  ASSERT_TRUE(want.ok()) << want.status();
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_LE(seam::testing::MaxRelativeError(*got, *want), tolerance);
  for (int step = 0; step < 20; ++step) {
    models::StepInput decode{{}, false};
    for (size_t i = 0; i < lengths.size(); ++i) {
      decode.sequences.push_back(models::SequenceStep{i, {int32_t(1 + (7 * step + i) % 127)}, lengths[i] + step});
    }
    // A sequence joins mid-way: its fresh cache (and state slot) runs beside continued ones.
    if (late_joiner && step >= 10) decode.sequences.push_back(models::SequenceStep{9, {int32_t(3 + step)}, step - 10});
    want = ForwardToHost(reference, decode);
    got = ForwardToHost(model, decode);
    ASSERT_TRUE(want.ok()) << want.status();
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_LE(seam::testing::MaxRelativeError(*got, *want), tolerance) << "decode step " << step;
  }
}

std::unique_ptr<DecodeGraph> CheckGraphStepsAgainstEager(LoadedModel& eager, LoadedModel& graphed, int64_t sequences,
                                                         int steps) {
  models::StepInput prefill{{}, false};
  for (int64_t i = 0; i < sequences; ++i) {
    prefill.sequences.push_back(
        models::SequenceStep{uint64_t(i), seam::testing::PromptTokens(60 + i, 5 + 4 * i, 128), 0});
  }
  const bool prefilled = ForwardToHost(eager, prefill).ok() && ForwardToHost(graphed, prefill).ok();
  EXPECT_TRUE(prefilled);
  if (!prefilled) return nullptr;
  auto graph = DecodeGraph::Capture(*graphed.model, *graphed.cache, sequences, 64);
  EXPECT_TRUE(graph.ok()) << graph.status();
  if (!graph.ok()) return nullptr;
  for (int step = 0; step < steps; ++step) {
    models::StepInput decode{{}, false};
    for (int64_t i = 0; i < sequences; ++i) {
      decode.sequences.push_back(
          models::SequenceStep{uint64_t(i), {int32_t(1 + (5 * step + i) % 127)}, 5 + 4 * i + step});
    }
    auto want = ForwardToHost(eager, decode);
    EXPECT_TRUE(want.ok()) << want.status();
    auto got = (*graph)->Step(decode);
    EXPECT_TRUE(got.ok()) << got.status();
    if (!want.ok() || !got.ok()) return nullptr;
    kernels::ScopedStream on((*graph)->stream().handle());  // the logits are ordered on the graph's stream
    auto host = got->To(Device::CPU());
    EXPECT_TRUE(host.ok()) << host.status();
    if (!host.ok()) return nullptr;
    EXPECT_EQ(seam::testing::MaxRelativeError(*host, *want), 0.0) << "decode step " << step;
  }
  return std::move(*graph);
}

}  // namespace seam::runtime::model_testing
