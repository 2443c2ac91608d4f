// PiecePipeline: a pipeline in one process for the model tests of tests/:
// one runtime::StageGroup per layer range (cuts {0, ..., layers}), a step run
// through each piece in turn with the handoff passed along, as stage servers
// would. Sequence i lives on attention-DP group i mod attn_dp, as a
// coordinator would spread them.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "seam/core/status.h"
#include "seam/runtime/stage_group.h"

namespace seam::testing {

class PiecePipeline {
 public:
  // `moe_experts`: how the MoE layers run their experts (ModelOptions).
  absl::Status Open(const std::string& dir, int tp, int attn_dp, const std::vector<int>& cuts,
                    models::MoeExperts moe_experts = models::MoeExperts::kAuto) {
    for (size_t i = 0; i + 1 < cuts.size(); ++i) {
      runtime::StageGroupOptions options;
      options.model.moe_experts = moe_experts;
      options.model.first_layer = cuts[i];
      options.model.end_layer = cuts[i + 1];
      auto group = runtime::StageGroup::Create(dir, tp, attn_dp, boundary::ReductionPolicy::kAuto, options);
      if (!group.ok()) return group.status();
      pieces_.push_back(std::move(*group));
    }
    return absl::OkStatus();
  }
  absl::StatusOr<std::vector<Tensor>> Step(std::vector<models::SequenceStep> sequences, bool all_logits) {
    for (size_t i = 0; i < sequences.size(); ++i) {
      sequences[i].dp_group = static_cast<int>(i % static_cast<size_t>(pieces_.front()->attn_dp()));
    }
    std::vector<boundary::PipelineTensors> handoff;
    for (auto& piece : pieces_) {
      SEAM_ASSIGN_OR_RETURN(runtime::PieceOutput out, piece->StepPiece(sequences, all_logits, handoff));
      if (piece->is_last_piece()) return std::move(out.logits);
      handoff = std::move(out.handoff);
    }
    return absl::InternalError("no last piece");
  }

 private:
  std::vector<std::unique_ptr<runtime::StageGroup>> pieces_;
};

}  // namespace seam::testing
