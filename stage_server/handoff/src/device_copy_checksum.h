// One kernel that copies a lane's payload spans device to device (or reads
// them only) and sums their device checksum (seam/handoff/device_checksum.h)
// in the same pass: the producer runs it from its tensors into its slot, the
// consumer from the producer's slot (through CUDA IPC) into its own tensors.
// When every block has added its part, the last block writes the checksum
// and then `ticket` into mapped host memory (after a system-wide fence), so
// the host learns both without a synchronising CUDA call. The producer's
// launch also stores the checksum on the device (its slot's trailer), and
// the consumer's reads that trailer back beside its own sum, so the two are
// compared without the producer's host ever waiting. Only compiled
// with the CUDA path; internal to seam_handoff.
#pragma once

#include <cstdint>

#include "absl/status/status.h"

namespace seam::handoff::device {

inline constexpr int kMaxCopySpans = 8;   // per lane: a hidden and a residual, with room
inline constexpr int kMaxCopyBlocks = 128;

struct CopySpan {
  const void* src = nullptr;
  void* dst = nullptr;  // null: checksum only
  uint64_t bytes = 0;
  uint64_t first_word = 0;  // the span's first word position (its slot offset / 4)
};

// What the host reads back: the checksum, the value found at `expected`
// (0 without one), then the ticket of the launch that wrote them.
struct CopyChecksumResult {
  uint64_t checksum;
  uint64_t expected;
  uint64_t ticket;
};

struct CopyChecksumParams {
  CopySpan spans[kMaxCopySpans];
  int count = 0;
  uint64_t seed = 0;
  uint64_t* partials = nullptr;       // device, kMaxCopyBlocks entries
  unsigned int* arrivals = nullptr;   // device counter, 0 between launches (the last block resets it)
  CopyChecksumResult* result = nullptr;  // mapped host memory (device-visible pointer)
  uint64_t ticket = 0;                // non-zero
  uint64_t* store = nullptr;          // device word the checksum is also written to, or null
  const uint64_t* expected = nullptr; // device word read into result->expected (after the copy), or null
};

// Enqueues the kernel on `stream` (a cudaStream_t) of the current device.
absl::Status LaunchCopyChecksum(const CopyChecksumParams& params, void* stream);

// Test hook: flips every bit of the byte at `p` (device memory), on `stream`.
absl::Status LaunchFlipByte(void* p, void* stream);

}  // namespace seam::handoff::device
