// Stage groups for consecutive layer ranges of one checkpoint, run one
// after another on each step (the first piece's handoff into the next), for
// the tests of graphs in the served path. Creation failures are reported as
// gtest failures and give null.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "seam/runtime/stage_group.h"

namespace seam::runtime::model_testing {

struct StagePieces {
  // Layers [cuts[i], cuts[i+1]) at TP `tp`, each with options(first, end).
  static std::unique_ptr<StagePieces>
  Make(const std::string &dir, int tp, const std::vector<int> &cuts,
       const std::function<StageGroupOptions(int, int)> &options) {
    auto p = std::make_unique<StagePieces>();
    for (size_t i = 0; i + 1 < cuts.size(); ++i) {
      auto group =
          StageGroup::Create(dir, tp, 1, boundary::ReductionPolicy::kAuto,
                             options(cuts[i], cuts[i + 1]));
      EXPECT_TRUE(group.ok()) << group.status();
      if (!group.ok())
        return nullptr;
      p->pieces.push_back(std::move(*group));
    }
    return p;
  }

  // One step through every piece; the last piece's logits.
  absl::StatusOr<std::vector<Tensor>>
  Step(const std::vector<models::SequenceStep> &sequences) {
    std::vector<boundary::PipelineTensors> handoff;
    for (auto &piece : pieces) {
      absl::StatusOr<PieceOutput> out =
          piece->StepPiece(sequences, false, handoff);
      if (!out.ok())
        return out.status();
      if (piece->is_last_piece())
        return std::move(out->logits);
      handoff = std::move(out->handoff);
    }
    return absl::InternalError("no last piece");
  }

  std::vector<std::unique_ptr<StageGroup>> pieces;
};

} // namespace seam::runtime::model_testing
