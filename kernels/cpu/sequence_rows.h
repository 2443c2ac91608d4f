// The per-sequence rows and state slots of a SequenceStates, read and checked
// on the host by the CPU state-space kernels (INVALID_ARGUMENT naming the
// sequence when query_start is not a partition of [0, T) or a slot is past
// the state tensor).
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "seam/kernels/ops.h"

namespace seam::kernels::cpu {

struct SequenceRows {
  int64_t begin = 0, end = 0;  // rows [begin, end)
  int32_t slot = -1;           // negative: no state (padding)
};

absl::StatusOr<std::vector<SequenceRows>> ReadSequenceRows(const SequenceStates& seqs, int64_t tokens,
                                                           int64_t slots);

}  // namespace seam::kernels::cpu
