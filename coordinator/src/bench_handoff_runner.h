// The handoff half of `seam bench pipeline`: runs seam-bench-handoff (seam's
// handoff and raw UcxWorker sends) and ucx_perftest tag_bw back to back per
// size and transport, and reports MiB/s with the seam / ucx_perftest ratios.
#pragma once

#include <ostream>
#include <string>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"

namespace seam::coordinator {

// `work_dir` receives the children's logs. Fails when a child fails or its
// output has no bandwidth figure.
absl::StatusOr<nlohmann::json> MeasureHandoffBandwidth(bool quick, const std::string& work_dir, std::ostream& out);

}  // namespace seam::coordinator
