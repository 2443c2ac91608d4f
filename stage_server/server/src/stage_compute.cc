// StageCompute over a runtime::StageGroup built for the stage's layer range
// (a pipeline piece; the whole model when the range covers every layer).
#include "seam/server/stage_compute.h"

#include "absl/strings/str_cat.h"
#include "seam/boundary/reduction_policy.h"
#include "seam/core/logging.h"
#include "seam/core/status.h"
#include "seam/runtime/stage_group.h"

namespace seam::server {
namespace {

class PieceCompute final : public StageCompute {
 public:
  PieceCompute(std::unique_ptr<runtime::StageGroup> group, std::string exit_policy, bool on_gpu)
      : group_(std::move(group)), exit_policy_(std::move(exit_policy)), on_gpu_(on_gpu) {}

  const weights::ModelConfig& model_config() const override { return group_->config(); }
  int tp() const override { return group_->tp(); }
  int attn_dp() const override { return group_->attn_dp(); }
  bool is_first() const override { return group_->is_first_piece(); }
  bool is_last() const override { return group_->is_last_piece(); }
  // Every Qwen3 / Qwen3-MoE decoder layer ends with its FFN (dense or MoE).
  v1::StageKind last_stage_kind() const override { return v1::STAGE_KIND_FFN; }
  std::string exit_policy() const override { return exit_policy_; }
  bool on_gpu() const override { return on_gpu_; }

  absl::StatusOr<StageOutput> Run(const std::vector<models::SequenceStep>& sequences, bool all_logits,
                                  const std::vector<boundary::PipelineTensors>& in) override {
    SEAM_ASSIGN_OR_RETURN(runtime::PieceOutput piece, group_->StepPiece(sequences, all_logits, in));
    StageOutput out;
    out.handoff = std::move(piece.handoff);
    out.logits = std::move(piece.logits);
    return out;
  }

  absl::Status Free(uint64_t sequence) override { return group_->Free(sequence); }

 private:
  std::unique_ptr<runtime::StageGroup> group_;
  std::string exit_policy_;
  bool on_gpu_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<StageCompute>> LoadStageCompute(const v1::StageConfig& config,
                                                               const weights::ModelConfig& model,
                                                               const ComputeOptions& compute) {
  const boundary::ReductionPolicy policy =
      boundary::ResolveReductionPolicy(boundary::ReductionPolicy::kAuto, model.architecture);
  runtime::StageGroupOptions options;
  options.first_layer = static_cast<int>(config.first_layer());
  options.end_layer = static_cast<int>(config.last_layer()) + 1;
  options.device = compute.device;
  options.first_gpu = compute.first_gpu;
  options.dtype = options.cache.dtype = compute.dtype;
  options.allreduce_fusion.mode = compute.allreduce_fusion;
  SEAM_ASSIGN_OR_RETURN(std::unique_ptr<runtime::StageGroup> group,
                        runtime::StageGroup::Create(config.model_dir(), static_cast<int>(config.tp_size()),
                                                   static_cast<int>(config.attn_dp_size()), policy, options));
  if (const std::string report = group->FusionReport(); !report.empty()) SEAM_LOG_INFO("{}", report);
  return std::unique_ptr<StageCompute>(new PieceCompute(std::move(group), boundary::ReductionPolicyName(policy),
                                                          compute.device == Device::Kind::kCUDA));
}

}  // namespace seam::server
