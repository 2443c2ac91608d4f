// StageCompute: what the stage actor asks of its model, one step at a time.
// It hides whether the stage runs the whole model or one pipeline piece: the
// actor hands in the previous piece's per-TP-rank tensors (none on the first
// stage) and gets back either handoff tensors (non-last stage) or logits.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "seam/boundary/ipc_fusion.h"
#include "seam/boundary/pipeline_handoff.h"
#include "seam/core/device.h"
#include "seam/core/tensor.h"
#include "seam/models/qwen3_model.h"
#include "seam/v1/stage_service.pb.h"
#include "seam/v1/stream_state.pb.h"
#include "seam/weights/model_config.h"

namespace seam::server {

struct StageOutput {
  // Non-last stage: one handoff per TP rank (index = TP rank), host tensors.
  std::vector<boundary::PipelineTensors> handoff;
  // Last stage: fp32 logits per sequence in input order, [tokens, vocab] with
  // all_logits and [1, vocab] otherwise.
  std::vector<Tensor> logits;
};

// Driven by the stage actor's thread only.
class StageCompute {
 public:
  virtual ~StageCompute() = default;

  virtual const weights::ModelConfig& model_config() const = 0;
  virtual int tp() const = 0;
  virtual int attn_dp() const = 0;
  virtual bool is_first() const = 0;
  virtual bool is_last() const = 0;
  // The facts a handoff from this stage declares (meaningful when !is_last()):
  // kind of its last declared layer stage and the exit policy it was bound with.
  virtual v1::StageKind last_stage_kind() const = 0;
  virtual std::string exit_policy() const = 0;
  // Whether the ranks compute on GPUs (handoffs then arrive in page-locked memory).
  virtual bool on_gpu() const { return false; }

  // One step of `sequences`; `in` holds tp() handoffs unless is_first().
  virtual absl::StatusOr<StageOutput> Run(const std::vector<models::SequenceStep>& sequences, bool all_logits,
                                          const std::vector<boundary::PipelineTensors>& in) = 0;
  // Frees a finished sequence's KV blocks; NOT_FOUND when this stage never saw it.
  virtual absl::Status Free(uint64_t sequence) = 0;
};

// Where and how a stage's ranks compute.
struct ComputeOptions {
  Device::Kind device = Device::Kind::kCPU;  // the host, or CUDA: TP rank r on GPU first_gpu + r
  int first_gpu = 0;
  // Weights, activations and handoffs (every stage of a pipeline alike);
  // logits are fp32 either way. Handoffs are host-staged on CUDA.
  DType dtype = DType::kF32;
  // CUDA bf16 TP groups: the IPC one-shot all-reduce + add + RMSNorm at stage
  // inputs (boundary/ipc_fusion.h); auto fuses where a start-up measurement
  // finds it no slower.
  boundary::AllReduceFusionMode allreduce_fusion = boundary::AllReduceFusionMode::kAuto;
};

// Loads the stage a validated `config` describes (`model`: its checkpoint's
// config): its layer range over a TP group of tp_size rank threads with
// attn_dp_size attention-DP groups, reductions chosen for the architecture,
// computing as `compute` says.
absl::StatusOr<std::unique_ptr<StageCompute>> LoadStageCompute(const v1::StageConfig& config,
                                                               const weights::ModelConfig& model,
                                                               const ComputeOptions& compute = {});

}  // namespace seam::server
