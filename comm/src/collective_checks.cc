// Validation of collective arguments (see collective_checks.h).
#include "collective_checks.h"

#include <numeric>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "seam/core/status.h"

namespace seam::comm::internal {
namespace {

Shape Trailing(const Tensor& t) { return Shape(t.shape().begin() + 1, t.shape().end()); }

absl::Status CheckUsable(const Tensor& t, const char* what, bool needs_rows) {
  SEAM_RETURN_IF_ERROR(ExpectDefined(t, what));
  SEAM_RETURN_IF_ERROR(ExpectContiguous(t, what));
  if (needs_rows && t.rank() < 1) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": needs at least one dimension (rows), got a scalar"));
  }
  return absl::OkStatus();
}

absl::Status CheckPair(const Tensor& input, const Tensor& output) {
  SEAM_RETURN_IF_ERROR(CheckUsable(input, "input", true));
  SEAM_RETURN_IF_ERROR(CheckUsable(output, "output", true));
  SEAM_RETURN_IF_ERROR(ExpectDType(output, input.dtype(), "output"));
  SEAM_RETURN_IF_ERROR(ExpectDevice(output, input.device(), "output"));
  if (Trailing(input) != Trailing(output)) {
    return absl::InvalidArgumentError(absl::StrCat("input ", ShapeToString(input.shape()), " and output ",
                                                   ShapeToString(output.shape()), " differ beyond dim 0"));
  }
  return absl::OkStatus();
}

absl::Status CheckCounts(const std::vector<int64_t>& counts, int size) {
  if (static_cast<int>(counts.size()) != size) {
    return absl::InvalidArgumentError(
        absl::StrCat("row_counts has ", counts.size(), " entries, the group has ", size, " ranks"));
  }
  for (size_t r = 0; r < counts.size(); ++r) {
    if (counts[r] < 0) {
      return absl::InvalidArgumentError(absl::StrCat("row_counts[", r, "] = ", counts[r], " is negative"));
    }
  }
  return absl::OkStatus();
}

CallPlan RowPlan(CollectiveKind kind, const std::string& group, const Tensor& full, std::vector<int64_t> counts) {
  CallPlan plan;
  plan.record.kind = kind;
  plan.record.group = group;
  plan.record.shape = full.shape();
  plan.record.dtype = full.dtype();
  plan.row_numel = full.row_numel();
  plan.row_bytes = static_cast<size_t>(plan.row_numel) * full.element_size();
  plan.offsets.resize(counts.size());
  std::exclusive_scan(counts.begin(), counts.end(), plan.offsets.begin(), int64_t{0});
  plan.total_rows = std::accumulate(counts.begin(), counts.end(), int64_t{0});
  plan.counts = std::move(counts);
  return plan;
}

absl::Status WithCall(CollectiveKind kind, absl::Status s) {
  return Annotate(s, CollectiveName(kind));
}

}  // namespace

std::string GroupContext(const char* backend, const std::string& group, int rank, int size) {
  return absl::StrCat(backend, " group '", group, "' rank ", rank, "/", size);
}

absl::StatusOr<CallPlan> PlanAllReduce(const std::string& group, const Tensor& data) {
  SEAM_RETURN_IF_ERROR(WithCall(CollectiveKind::kAllReduce, CheckUsable(data, "data", false)));
  CallPlan plan;
  plan.record.kind = CollectiveKind::kAllReduce;
  plan.record.group = group;
  plan.record.shape = data.shape();
  plan.record.dtype = data.dtype();
  plan.row_numel = data.numel();
  plan.row_bytes = data.nbytes();
  return plan;
}

absl::StatusOr<CallPlan> PlanReduceScatter(const std::string& group, int rank, int size, const Tensor& input,
                                           const Tensor& output) {
  const auto kind = CollectiveKind::kReduceScatter;
  SEAM_RETURN_IF_ERROR(WithCall(kind, CheckPair(input, output)));
  if (input.rows() != output.rows() * size) {
    return WithCall(kind, absl::InvalidArgumentError(absl::StrCat("input has ", input.rows(), " rows, expected ",
                                                                  size, " ranks x ", output.rows(), " output rows")));
  }
  return RowPlan(kind, group, input, std::vector<int64_t>(size, output.rows()));
}

absl::StatusOr<CallPlan> PlanReduceScatterV(const std::string& group, int rank, int size, const Tensor& input,
                                            const std::vector<int64_t>& row_counts, const Tensor& output) {
  const auto kind = CollectiveKind::kReduceScatterV;
  SEAM_RETURN_IF_ERROR(WithCall(kind, CheckPair(input, output)));
  SEAM_RETURN_IF_ERROR(WithCall(kind, CheckCounts(row_counts, size)));
  CallPlan plan = RowPlan(kind, group, input, row_counts);
  plan.record.row_counts = row_counts;
  if (input.rows() != plan.total_rows) {
    return WithCall(kind, absl::InvalidArgumentError(absl::StrCat("input has ", input.rows(),
                                                                  " rows, expected the sum of row_counts [",
                                                                  absl::StrJoin(row_counts, ", "), "] = ",
                                                                  plan.total_rows)));
  }
  if (output.rows() != row_counts[rank]) {
    return WithCall(kind, absl::InvalidArgumentError(absl::StrCat("output has ", output.rows(),
                                                                  " rows, expected row_counts[", rank,
                                                                  "] = ", row_counts[rank])));
  }
  return plan;
}

absl::StatusOr<CallPlan> PlanAllGather(const std::string& group, int rank, int size, const Tensor& input,
                                       const Tensor& output) {
  const auto kind = CollectiveKind::kAllGather;
  SEAM_RETURN_IF_ERROR(WithCall(kind, CheckPair(input, output)));
  if (output.rows() != input.rows() * size) {
    return WithCall(kind, absl::InvalidArgumentError(absl::StrCat("output has ", output.rows(), " rows, expected ",
                                                                  size, " ranks x ", input.rows(), " input rows")));
  }
  return RowPlan(kind, group, output, std::vector<int64_t>(size, input.rows()));
}

absl::StatusOr<CallPlan> PlanAllGatherV(const std::string& group, int rank, int size, const Tensor& input,
                                        const std::vector<int64_t>& row_counts, const Tensor& output) {
  const auto kind = CollectiveKind::kAllGatherV;
  SEAM_RETURN_IF_ERROR(WithCall(kind, CheckPair(input, output)));
  SEAM_RETURN_IF_ERROR(WithCall(kind, CheckCounts(row_counts, size)));
  CallPlan plan = RowPlan(kind, group, output, row_counts);
  plan.record.row_counts = row_counts;
  if (input.rows() != row_counts[rank]) {
    return WithCall(kind, absl::InvalidArgumentError(absl::StrCat("input has ", input.rows(),
                                                                  " rows, expected row_counts[", rank,
                                                                  "] = ", row_counts[rank])));
  }
  if (output.rows() != plan.total_rows) {
    return WithCall(kind, absl::InvalidArgumentError(absl::StrCat("output has ", output.rows(),
                                                                  " rows, expected the sum of row_counts [",
                                                                  absl::StrJoin(row_counts, ", "), "] = ",
                                                                  plan.total_rows)));
  }
  return plan;
}

absl::StatusOr<CallPlan> PlanBroadcast(const std::string& group, int size, const Tensor& data, int root) {
  const auto kind = CollectiveKind::kBroadcast;
  SEAM_RETURN_IF_ERROR(WithCall(kind, CheckUsable(data, "data", false)));
  if (root < 0 || root >= size) {
    return WithCall(kind, absl::InvalidArgumentError(
                              absl::StrCat("root ", root, " is not a rank of a group of ", size)));
  }
  CallPlan plan;
  plan.record.kind = kind;
  plan.record.group = group;
  plan.record.shape = data.shape();
  plan.record.dtype = data.dtype();
  plan.record.root = root;
  plan.row_numel = data.numel();
  plan.row_bytes = data.nbytes();
  return plan;
}

CallPlan PlanBarrier(const std::string& group) {
  CallPlan plan;
  plan.record.kind = CollectiveKind::kBarrier;
  plan.record.group = group;
  return plan;
}

}  // namespace seam::comm::internal
