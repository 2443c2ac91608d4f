// NemotronHModel: one rank's part of a Nemotron-H hybrid (NemotronHForCausalLM)
// on the boundary library. Each character of hybrid_override_pattern is one
// pre-norm stage: a Mamba2 mixer (M) or attention without rotary embedding
// (*), both declared as exit-scoped mixers that do not gather their
// attention-TP input (their compute gathers through the boundary), or a
// squared-ReLU MLP (-), declared an FFN. Mamba heads and groups and
// attention heads are split over attention TP, the MLP intermediate over
// TP; every output projection returns a partial sum its stage's boundary
// completes, and the model never calls a collective. A rank may build any
// layer range (a pipeline piece); the Mamba layers' conv and SSM states live
// in its KvCache (MambaStateCache), the attention layers' keys and values in
// its blocks. One model per rank thread; the forwards are not reentrant.
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "seam/models/decoder_model.h"

namespace seam::models {

class NemotronHModel final : public DecoderModel {
 public:
  // INVALID_ARGUMENT for a layer range outside the model, a policy not
  // resolved, or heads / groups / intermediate that do not divide;
  // UNIMPLEMENTED for residual_in_fp32 with a compute dtype other than f32;
  // NOT_FOUND naming a missing tensor.
  static absl::StatusOr<std::unique_ptr<NemotronHModel>> Load(const weights::Checkpoint& checkpoint,
                                                              const ModelOptions& options);
  ~NemotronHModel() override;

  int64_t layers() const override;
  // Decode steps may be CUDA graphs of any size (graph_max_rows: the
  // default): the Mamba kernels run on CUDA and runtime::DecodeGraph carries
  // the state slots among its fixed inputs; a replayed step equals an eager
  // one on an H200 (runtime_test CudaModelNemotronH.GraphDecodeEqualsEagerDecode).
  // KV blocks for this rank's attention layers and state slots for its Mamba layers.
  absl::StatusOr<std::unique_ptr<KvCache>> MakeCache(KvCacheOptions options) const override;
  const boundary::StageBoundary* entry_boundary() const override;

  struct Impl;

 private:
  NemotronHModel(const weights::ModelConfig& config, const ModelOptions& options);
  absl::Status LoadBlocks(const weights::Checkpoint& checkpoint);
  absl::StatusOr<boundary::Hidden> RunLayers(boundary::Hidden h, boundary::ForwardBatch& batch,
                                             const CacheBatch& step, KvCache& cache,
                                             const internal::CpAttention* cp) const override;
  std::unique_ptr<Impl> impl_;
};

}  // namespace seam::models
