// The chunked SSD kernel behind SelectiveScan's ScanAlgorithm::kChunked
// (internal to kernels/cuda; mamba_scan.cu chooses it): launched once the
// caller has checked ChunkedScanTakes, f32 dt_bias / a / d and 16-byte
// aligned x, b, c and out.
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "seam/kernels/ops.h"

namespace seam::kernels::cuda {

// `chunk`: 32 or 64.
absl::Status ChunkedSelectiveScan(const SelectiveScanParams& params, int64_t chunk);

}  // namespace seam::kernels::cuda
