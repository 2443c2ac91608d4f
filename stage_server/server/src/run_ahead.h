// Which descriptor may take a decode step that a stage ran ahead of it
// (MicrobatchRunner::set_run_ahead): the one that continues the wave it
// followed exactly, so that the step run ahead is the step that descriptor
// asks for, on the same inputs.
#pragma once

#include <cstdint>
#include <vector>

#include "seam/v1/stage_service.pb.h"

namespace seam::server {

// Whether `next` continues `ran`, a wave member of one microbatch run for
// `steps` steps whose last step chose `last_tokens` (one per sequence):
// same epoch, not part of a wave of several members, the same sequences in
// the same order, each a one-token decode step without log-probs at
// position_start + steps, fed the token its last step chose, on the same
// DP group, sampled alike.
bool ContinuesWave(const v1::MicrobatchDescriptor& ran, uint32_t steps, const std::vector<int32_t>& last_tokens,
                   const v1::MicrobatchDescriptor& next);

}  // namespace seam::server
