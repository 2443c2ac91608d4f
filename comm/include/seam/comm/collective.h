// The vocabulary of collective calls: their kinds and a rank-independent
// record of one call (what every rank of a group must agree on). Used by the
// recording fake's logs and by every backend's error messages.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "seam/core/dtype.h"
#include "seam/core/tensor.h"

namespace seam::comm {

enum class CollectiveKind : uint8_t {
  kAllReduce,
  kReduceScatter,
  kReduceScatterV,
  kAllGather,
  kAllGatherV,
  kBroadcast,
  kBarrier,
};

// "AllReduce", "ReduceScatterV", ...
const char* CollectiveName(CollectiveKind kind);

// One call as every rank of the group sees it. `shape` is the group-wide
// shape: the data for AllReduce/Broadcast, the full input for the
// reduce-scatters, the full output for the gathers (empty for Barrier).
struct CollectiveRecord {
  CollectiveKind kind = CollectiveKind::kBarrier;
  std::string group;
  Shape shape;
  DType dtype = DType::kF32;
  std::vector<int64_t> row_counts;  // V variants only
  int root = -1;                    // Broadcast only

  // "AllGatherV(tp, bf16[7, 16], rows [3, 0, 4])".
  std::string ToString() const;
  bool operator==(const CollectiveRecord& o) const;
  bool operator!=(const CollectiveRecord& o) const { return !(*this == o); }
};

}  // namespace seam::comm
