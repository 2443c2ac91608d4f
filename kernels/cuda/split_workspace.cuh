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

#include <cmath>
#include <cstddef>
#include <cstdint>

namespace seam::kernels::cuda::attn {

struct SplitWorkspace {
  float* partials;     // kSplitPartialFloats floats
  int* counters;       // kSplitCounters ints, zero between launches
};

constexpr size_t kSplitPartialFloats = size_t{8} << 20;  // 32 MiB
constexpr int kSplitCounters = 16384;

// What a split kernel launch gets of the workspace (null pointers: no
// splits), and the blocks the GPU holds at once for that kernel.
struct SplitArgs {
  float* partials;
  int* counters;
  int slots;
};

// The workspace of `stream` on the current device, or nullptr (see above).
const SplitWorkspace* SplitWorkspaceFor(cudaStream_t stream);

// The split arguments of a launch that chose `*splits` splits: the
// workspace of `stream` when there is more than one, and one split (null
// pointers) when the stream has no workspace.
inline SplitArgs SplitArgsFor(cudaStream_t stream, int64_t* splits) {
  if (*splits <= 1) return SplitArgs{nullptr, nullptr, 0};
  const SplitWorkspace* ws = SplitWorkspaceFor(stream);
  if (ws == nullptr) {
    *splits = 1;
    return SplitArgs{nullptr, nullptr, 0};
  }
  return SplitArgs{ws->partials, ws->counters, 0};
}

// Splits of each of `units` independent pieces of work (each `steps` steps
// of streaming, split into shares of at least `min_steps`), from what the
// caller knows without a sync: the count minimising waves x (a split's share
// + a block's fixed cost), waves over `slots` resident blocks, the fixed cost
// taken as kSplitOverheadSteps steps; the fewest splits among equals. 1 when
// the partials (`partial_floats` each) would not fit the workspace or the
// units its counters; at most max_splits.
constexpr int kSplitOverheadSteps = 8;
__host__ __device__ inline int64_t ChooseSplits(int64_t units, int64_t steps, int64_t min_steps, int64_t slots,
                                                int64_t partial_floats, int64_t max_splits) {
  if (units <= 0 || units > kSplitCounters || slots <= 0 || steps <= 0) return 1;
  int64_t cap = (steps + min_steps - 1) / (min_steps > 0 ? min_steps : 1);
  cap = cap < max_splits ? cap : max_splits;
  const int64_t fit = static_cast<int64_t>(kSplitPartialFloats) / (units * (partial_floats > 0 ? partial_floats : 1));
  cap = cap < fit ? cap : fit;
  const double overhead = static_cast<double>(kSplitOverheadSteps) / static_cast<double>(steps);
  int64_t best = 1;
  double best_cost = static_cast<double>((units + slots - 1) / slots) * (1.0 + overhead);
  for (int64_t s = 2; s <= cap; ++s) {
    const double waves = static_cast<double>((units * s + slots - 1) / slots);
    const double cost = waves * (1.0 / static_cast<double>(s) + overhead);
    if (cost < best_cost * (1 - 1e-6)) {
      best = s;
      best_cost = cost;
    }
  }
  return best;
}

// Merges n partial softmaxes of one output element: partial i has the
// unnormalised output o[i * stride_o] and (max in the log2 domain, sum) at
// ml[i * stride_ml], ml[i * stride_ml + 1]; returns sum o_i 2^(m_i - M) and
// sum l_i 2^(m_i - M) with M the largest max (a partial with no keys has
// m = -inf, l = 0, o = 0 and adds nothing). kL2 reads past L1, for partials
// other blocks wrote.
template <bool kL2>
__device__ __forceinline__ void MergeSplitPartials(const float* o, const float* ml, int n, int stride_o,
                                                   int stride_ml, float* num, float* den, float* m) {
  auto load = [](const float* a) { return kL2 ? __ldcg(a) : *a; };
  float m_max = -INFINITY;
  for (int i = 0; i < n; ++i) m_max = fmaxf(m_max, load(ml + i * stride_ml));
  const float m_use = m_max == -INFINITY ? 0.0f : m_max;
  float sn = 0.0f, sd = 0.0f;
  for (int i = 0; i < n; ++i) {
    const float weight = exp2f(load(ml + i * stride_ml) - m_use);
    sn += load(o + i * stride_o) * weight;
    sd += load(ml + i * stride_ml + 1) * weight;
  }
  *num = sn;
  *den = sd;
  *m = m_max;
}

// Counts block `unit`'s arrival after its partial is written (every thread
// fences its own writes first); true in every thread of the block that
// arrives last of `active`, which also resets the counter for the next
// launch. Block-wide: every thread calls it.
__device__ __forceinline__ bool ArriveLast(int* counters, int unit, int active, int* flag_s) {
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) {
    const int arrived = atomicAdd(&counters[unit], 1);
    *flag_s = arrived == active - 1;
    if (*flag_s) counters[unit] = 0;
  }
  __syncthreads();
  const bool last = *flag_s != 0;
  if (last) __threadfence();
  return last;
}

}  // namespace seam::kernels::cuda::attn
