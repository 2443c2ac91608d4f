// Host memory that is filled and dropped again and again (handoff payloads,
// data on its way between a GPU and the host). Blocks come in power-of-two
// size classes and go back to a process-wide cache when their storage is
// dropped, so a steady stream of same-sized buffers neither page-faults fresh
// memory in nor (page-locked) pays cudaHostAlloc again; each of the two
// caches keeps at most kMaxCachedStagingBytes of idle blocks and frees the
// rest. Page-locked blocks (cudaHostAlloc) make device-host copies run at
// full speed instead of through the driver's pageable staging; they are
// handed out only when asked for and this build has the CUDA path and a GPU
// is visible (plain 64-byte aligned memory otherwise), so a host-only process
// never creates a CUDA context for them. Thread-safe.
#pragma once

#include <cstddef>
#include <memory>

#include "absl/status/statusor.h"
#include "seam/core/tensor.h"

namespace seam {

inline constexpr size_t kMaxCachedStagingBytes = size_t{1} << 30;
// Larger requests get plain, uncached host memory (a power-of-two class
// would waste up to half of it, and page-locking gigabytes takes seconds).
inline constexpr size_t kMaxStagingBlockBytes = size_t{64} << 20;

// Host storage of at least `bytes` (device() is the host).
absl::StatusOr<std::shared_ptr<Storage>> AllocateHostStaging(size_t bytes, bool page_locked);

// Whether a page-locked request gets page-locked memory in this process.
bool HostStagingCanPageLock();

// An uninitialised contiguous host tensor on such storage.
absl::StatusOr<Tensor> EmptyHostStaging(const Shape& shape, DType dtype, bool page_locked);

}  // namespace seam
