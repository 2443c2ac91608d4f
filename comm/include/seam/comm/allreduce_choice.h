// The decision whether the one-shot all-reduce + add + RMSNorm kernel
// (IpcAllReduceFusion) replaces the unfused path (NCCL all-reduce followed by
// FusedAddRmsNorm) for a given size. The decision follows measurement only:
// a size is fused when a measurement of both paths exists for it and the
// fused latency is not above the unfused one. Pure CPU code.
#pragma once

#include <cstdint>
#include <map>
#include <utility>

namespace seam::comm {

struct AllReduceNormTiming {
  double fused_us = 0;    // one-shot IPC kernel, median latency
  double unfused_us = 0;  // NCCL all-reduce + FusedAddRmsNorm, median latency
};

// Measured latencies keyed by (tokens, hidden), for one TP size and one GPU type.
using AllReduceNormTable = std::map<std::pair<int64_t, int64_t>, AllReduceNormTiming>;

// True when the fused path should run for `tokens` rows of width `hidden`.
// An exact (tokens, hidden) entry decides by itself. Otherwise the nearest
// measured token counts at the same hidden that bracket `tokens` (below and
// above) must both favour the fused path; a size outside the measured range,
// or with no measurement at that hidden, is never fused. Non-positive or
// non-finite timings count as missing.
bool ChooseFusedAllReduce(int64_t tokens, int64_t hidden, const AllReduceNormTable& table);

}  // namespace seam::comm
