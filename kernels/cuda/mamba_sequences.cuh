// How the Mamba2 kernels read a step's SequenceStates on the device (internal
// to kernels/cuda): the sequence that holds a token row, and a state slot
// made safe to index. The values are not validated on the device (that would
// need a host round trip); out-of-range slots read and write nothing.
#pragma once

#include <cstdint>

namespace seam::kernels::cuda {

// The sequence s with query_start[s] <= t < query_start[s + 1], for
// query_start non-decreasing from 0 to T > t: the last s whose start is <= t.
__device__ __forceinline__ int SequenceOfRow(const int32_t* query_start, int64_t seqs, int64_t t) {
  int lo = 0, hi = static_cast<int>(seqs) - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (query_start[mid] <= t) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return lo;
}

// The slot, or -1 (padding: a zero state, nothing written back) when it is
// negative or past the state tensor.
__device__ __forceinline__ int UsableSlot(int32_t slot, int64_t num_slots) {
  return slot >= 0 && slot < num_slots ? slot : -1;
}

}  // namespace seam::kernels::cuda
