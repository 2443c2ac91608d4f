#include "row_movement.h"

#include <numeric>

#include "seam/core/status.h"

namespace seam::boundary::rows {
namespace {
Shape WithRows(const Tensor& t, int64_t rows) {
  Shape s = t.shape();
  s[0] = rows;
  return s;
}
}  // namespace

Tensor PadRows(const Tensor& t, int64_t rows) {
  SEAM_CHECK_MSG(rows >= t.rows(), "pad to ", rows, " rows below ", t.rows());
  Tensor out = Tensor::Zeros(WithRows(t, rows), t.dtype(), t.device());
  SEAM_CHECK_OK(CopyInto(t, out.Rows(0, t.rows())));
  return out;
}

absl::StatusOr<Tensor> ReduceScatterPadded(comm::Communicator& c, const Tensor& input, int64_t chunk, int64_t keep) {
  const int64_t total = chunk * c.size();
  Tensor in = input.rows() == total && input.is_contiguous() ? input : PadRows(input, total);
  Tensor out = Tensor::Empty(WithRows(input, chunk), input.dtype(), input.device());
  SEAM_RETURN_IF_ERROR(c.ReduceScatter(in, out));
  return out.Rows(0, keep);
}

absl::StatusOr<Tensor> ReduceScatterCounts(comm::Communicator& c, const Tensor& input,
                                           const std::vector<int64_t>& counts) {
  Tensor in = input.is_contiguous() ? input : input.Clone();
  Tensor out = Tensor::Empty(WithRows(input, counts[c.rank()]), input.dtype(), input.device());
  SEAM_RETURN_IF_ERROR(c.ReduceScatterV(in, counts, out));
  return out;
}

absl::StatusOr<Tensor> GatherPadded(comm::Communicator& c, const Tensor& input, int64_t chunk) {
  Tensor in = input.rows() == chunk && input.is_contiguous() ? input : PadRows(input, chunk);
  Tensor out = Tensor::Empty(WithRows(input, chunk * c.size()), input.dtype(), input.device());
  SEAM_RETURN_IF_ERROR(c.AllGather(in, out));
  return out;
}

absl::StatusOr<Tensor> GatherCounts(comm::Communicator& c, const Tensor& input, const std::vector<int64_t>& counts) {
  const int64_t total = std::accumulate(counts.begin(), counts.end(), int64_t{0});
  Tensor in = input.is_contiguous() ? input : input.Clone();
  Tensor out = Tensor::Empty(WithRows(input, total), input.dtype(), input.device());
  SEAM_RETURN_IF_ERROR(c.AllGatherV(in, counts, out));
  return out;
}

}  // namespace seam::boundary::rows
