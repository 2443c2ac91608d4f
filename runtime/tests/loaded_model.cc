#include "loaded_model.h"

#include <gtest/gtest.h>

#include "seam/boundary/forward_batch.h"
#include "seam/core/status.h"

namespace seam::runtime::model_testing {

LoadedModel LoadWholeModel(const std::string& checkpoint_dir, DType dtype, Device device) {
  LoadedModel l;
  auto checkpoint = weights::Checkpoint::Open(checkpoint_dir);
  EXPECT_TRUE(checkpoint.ok()) << checkpoint.status();
  if (!checkpoint.ok()) return l;
  l.checkpoint = std::move(*checkpoint);
  auto topology = boundary::Topology::Make(1, 1, 0);
  models::ModelOptions options{*topology, boundary::ReductionPolicy::kAr, dtype};
  options.device = device;
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

}  // namespace seam::runtime::model_testing
