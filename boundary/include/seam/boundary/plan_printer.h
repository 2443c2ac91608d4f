// Plan printing: the bound paths of a stack's stages as text (for people) or
// JSON (for tools). Only rank-independent facts are printed (topology sizes,
// never the rank), so every rank of a group prints the same bytes and two
// ranks' plans can be compared by comparing strings.
#pragma once

#include <string>
#include <vector>

#include "seam/boundary/plan.h"

namespace seam::boundary {

// One header line (topology sizes, policy, stage count), then for every stage
// its index, layer, declaration and place, and per batch variant its entry
// paths, exit facts and options, final-read paths (terminal stage) and the
// collectives each path issues. Stages are printed in the order given.
std::string PlanToText(const std::vector<const StagePlan*>& stages);

// The same content as a JSON document:
// {"topology": {"tp", "attn_dp", "attn_tp"}, "policy", "stages": [...]}.
std::string PlanToJson(const std::vector<const StagePlan*>& stages);

}  // namespace seam::boundary
