// A whole model on one rank (TP 1, policy ar) with its KV cache, for the GPU
// tests that run a checkpoint on a device and on the CPU. Loading failures
// are reported as gtest failures and leave `model` null.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "seam/core/tensor.h"
#include "seam/models/decoder_model.h"
#include "seam/models/kv_cache.h"
#include "seam/runtime/decode_graph.h"
#include "seam/weights/checkpoint.h"

namespace seam::runtime::model_testing {

struct LoadedModel {
  std::unique_ptr<weights::Checkpoint> checkpoint;
  std::unique_ptr<models::DecoderModel> model;
  std::unique_ptr<models::KvCache> cache;
};

// The whole model on `device`; `scan` chooses Nemotron-H's Mamba2 scan kernel.
LoadedModel LoadWholeModel(const std::string& checkpoint_dir, DType dtype, Device device,
                           kernels::ScanAlgorithm scan = kernels::ScanAlgorithm::kAuto);

// `input` through the whole stack as one ordinary batch; the logits on the host.
absl::StatusOr<Tensor> ForwardToHost(LoadedModel& l, const models::StepInput& input);

// The same steps on `reference` (the CPU) and `model` (a GPU): a prefill of
// three prompts of 7, 1 and 30 tokens, then 20 cached decode steps (each
// crossing a 16-token block), with a fourth sequence joining at step 10 when
// `late_joiner`; every step's logits within `tolerance` of the reference's
// (relative to their scale).
void ExpectPrefillAndDecodeMatch(LoadedModel& reference, LoadedModel& model, double tolerance, bool late_joiner);

// Prefills `sequences` prompts on both models, captures a decode graph of
// that many sequences on `graphed`, and checks `steps` replayed decode steps
// against the eager ones of `eager` bit for bit (the same kernels on the same
// inputs). Returns the graph for further checks; null after a failure.
std::unique_ptr<DecodeGraph> CheckGraphStepsAgainstEager(LoadedModel& eager, LoadedModel& graphed, int64_t sequences,
                                                         int steps);

}  // namespace seam::runtime::model_testing
