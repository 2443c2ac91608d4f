// The log of a stage group's batch-variant choices: one info line the first
// time each variant runs (what was chosen, for which rows, under which
// configuration), a debug line for every step. Owned by the group's Impl;
// called from the thread that steps it.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "seam/boundary/variant_choice.h"
#include "seam/models/decoder_model.h"

namespace seam::runtime {

class BatchVariantLog {
 public:
  void Note(uint64_t microbatch, boundary::BatchVariant variant, const boundary::VariantChoiceOptions& choice,
            const std::vector<int64_t>& dp_rows, bool graph);

 private:
  std::array<bool, 5> seen_{};
};

}  // namespace seam::runtime
