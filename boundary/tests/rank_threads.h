// Runs one function per TP rank of a topology on its own thread, each with
// its ProcessGroups (recording fake or real Gloo), and collects the results.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "seam/boundary/layout.h"
#include "seam/comm/process_groups.h"

namespace seam::boundary::testing {

using RankFn = std::function<absl::Status(const Topology& topology, const StageComms& comms)>;

// One status per TP rank, in rank order.
std::vector<absl::Status> RunRanks(int tp, int attn_dp, const comm::CommunicatorFactory& factory, const RankFn& fn,
                                   int attn_cp = 1);

// The StageComms view of a rank's groups.
StageComms CommsOf(const comm::ProcessGroups& groups);

}  // namespace seam::boundary::testing
