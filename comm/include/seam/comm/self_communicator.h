// SelfCommunicator: the communicator of a group of one rank. Collectives are
// identities or copies (validated like every other backend), so code paths
// that always call their group work unchanged on a single device.
#pragma once

#include <memory>
#include <string>

#include "seam/comm/communicator.h"

namespace seam::comm {

// rank() == 0, size() == 1. Works on host and CUDA tensors.
std::unique_ptr<Communicator> MakeSelfCommunicator(std::string group_name);

}  // namespace seam::comm
