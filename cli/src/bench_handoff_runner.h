// The handoff half of `seam bench pipeline`: runs seam-bench-handoff (seam's
// handoff and raw UcxWorker sends, and its handoff ping-pong) and ucx_perftest
// (tag_bw, tag_lat) back to back per size and transport, and reports MiB/s and
// one-way microseconds with the seam / ucx_perftest ratios.
#pragma once

#include <ostream>
#include <string>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"

namespace seam::cli {

// `work_dir` receives the children's logs. Fails when a child fails or its
// output has no bandwidth figure.
absl::StatusOr<nlohmann::json> MeasureHandoffBandwidth(bool quick, const std::string& work_dir, std::ostream& out);

// One-way latency of a pending handoff (header + bf16 hidden and residual,
// [tokens, 1024] each, host tensors) for tokens 1, 8, 64, 256 (and 1024
// unless `quick`) on tcp and shm: seam's median and p99 against ucx_perftest
// tag_lat's median at the same payload bytes. Fails like the bandwidth half.
absl::StatusOr<nlohmann::json> MeasureHandoffLatency(bool quick, const std::string& work_dir, std::ostream& out);

}  // namespace seam::cli
