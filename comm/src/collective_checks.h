// Argument validation shared by every Communicator backend: checks the
// tensors of one call against the interface's contract and describes the
// call as a rank-independent record plus its row layout. Errors are
// INVALID_ARGUMENT; nothing has been sent when they are returned.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "seam/comm/collective.h"
#include "seam/core/tensor.h"

namespace seam::comm::internal {

struct CallPlan {
  CollectiveRecord record;
  int64_t row_numel = 0;         // elements per row
  size_t row_bytes = 0;          // bytes per row
  std::vector<int64_t> counts;   // rows of each rank (row-split calls only)
  std::vector<int64_t> offsets;  // first row of each rank in the full tensor
  int64_t total_rows = 0;        // Σ counts
};

absl::StatusOr<CallPlan> PlanAllReduce(const std::string& group, const Tensor& data);
absl::StatusOr<CallPlan> PlanReduceScatter(const std::string& group, int rank, int size, const Tensor& input,
                                           const Tensor& output);
absl::StatusOr<CallPlan> PlanReduceScatterV(const std::string& group, int rank, int size, const Tensor& input,
                                            const std::vector<int64_t>& row_counts, const Tensor& output);
absl::StatusOr<CallPlan> PlanAllGather(const std::string& group, int rank, int size, const Tensor& input,
                                       const Tensor& output);
absl::StatusOr<CallPlan> PlanAllGatherV(const std::string& group, int rank, int size, const Tensor& input,
                                        const std::vector<int64_t>& row_counts, const Tensor& output);
absl::StatusOr<CallPlan> PlanBroadcast(const std::string& group, int size, const Tensor& data, int root);
CallPlan PlanBarrier(const std::string& group);

// "<backend> group '<group>' rank <rank>/<size>", the prefix of every error.
std::string GroupContext(const char* backend, const std::string& group, int rank, int size);

}  // namespace seam::comm::internal
