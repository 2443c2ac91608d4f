// The scratch memory of split-context decode attention (internal to
// kernels/cuda): when one (sequence, kv head) is streamed by several thread
// blocks, each block leaves its partial softmax (unnormalised output rows,
// running max and sum) here and the last one to finish merges them, counted
// by a per-(sequence, kv head) arrival counter that the merging block resets
// to zero.
//
// One fixed-size workspace per (device, stream), so that attention running on
// two streams at once (the two microbatches of a two-batch overlap) never
// shares partials. It is allocated on the first call for its stream that is
// not inside a CUDA graph capture, its counters zeroed in stream order, and
// kept for the life of the process (a captured graph holds its address).
// Callers size their splits to it from shapes only; a stream first seen
// inside a capture, or a failed allocation, gets none, and the caller then
// does not split (slower, still correct). Thread-safe.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

namespace seam::kernels::cuda::attn {

struct SplitWorkspace {
  float* partials;     // kSplitPartialFloats floats
  int* counters;       // kSplitCounters ints, zero between launches
};

constexpr size_t kSplitPartialFloats = size_t{8} << 20;  // 32 MiB
constexpr int kSplitCounters = 16384;

// The workspace of `stream` on the current device, or nullptr (see above).
const SplitWorkspace* SplitWorkspaceFor(cudaStream_t stream);

}  // namespace seam::kernels::cuda::attn
