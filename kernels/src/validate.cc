// Argument checks shared by the op dispatchers (see validate.h).
#include "src/validate.h"

#include "absl/strings/str_cat.h"
#include "seam/core/status.h"

namespace seam::kernels::internal {

absl::Status ExpectFloatTensor(const Tensor& t, const char* what) {
  SEAM_RETURN_IF_ERROR(ExpectDefined(t, what));
  const DType d = t.dtype();
  if (d != DType::kF32 && d != DType::kBF16 && d != DType::kF16) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": expected dtype f32, bf16 or f16, got ", DTypeName(d)));
  }
  return ExpectContiguous(t, what);
}

absl::Status ExpectIndexTensor(const Tensor& t, const char* what) {
  SEAM_RETURN_IF_ERROR(ExpectDType(t, DType::kI32, what));
  return ExpectContiguous(t, what);
}

absl::Status ExpectDimSize(const Tensor& t, int dim, int64_t size, const char* what) {
  SEAM_RETURN_IF_ERROR(ExpectDefined(t, what));
  if (dim < t.rank() && t.shape()[dim] == size) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(what, ": expected dim ", dim, " of size ", size, ", got shape ",
                                                 ShapeToString(t.shape())));
}

absl::Status ExpectAttentionBatch(const AttentionBatch& batch) {
  SEAM_RETURN_IF_ERROR(ExpectIndexTensor(batch.context_lens, "context_lens"));
  SEAM_RETURN_IF_ERROR(ExpectRank(batch.context_lens, 1, "context_lens"));
  const int64_t seqs = batch.context_lens.dim(0);
  SEAM_RETURN_IF_ERROR(ExpectIndexTensor(batch.query_start, "query_start"));
  SEAM_RETURN_IF_ERROR(ExpectShape(batch.query_start, {seqs + 1}, "query_start"));
  SEAM_RETURN_IF_ERROR(ExpectIndexTensor(batch.block_tables, "block_tables"));
  SEAM_RETURN_IF_ERROR(ExpectRank(batch.block_tables, 2, "block_tables"));
  return ExpectDimSize(batch.block_tables, 0, seqs, "block_tables");
}

absl::StatusOr<Device> CommonDevice(std::initializer_list<Named> tensors) {
  const Named* first = nullptr;
  for (const Named& n : tensors) {
    SEAM_RETURN_IF_ERROR(ExpectDefined(*n.first, n.second));
    if (first == nullptr) {
      first = &n;
    } else if (n.first->device() != first->first->device()) {
      return absl::InvalidArgumentError(absl::StrCat(n.second, " is on ", n.first->device().ToString(), " but ",
                                                     first->second, " is on ",
                                                     first->first->device().ToString()));
    }
  }
  SEAM_CHECK(first != nullptr);
  return first->first->device();
}

absl::Status NoCudaKernel(const char* op) {
#ifdef SEAM_HAVE_CUDA
  return absl::UnimplementedError(absl::StrCat(op, " has no CUDA kernel yet"));
#else
  return absl::FailedPreconditionError(absl::StrCat(op, ": CUDA tensor given to a build without CUDA"));
#endif
}

}  // namespace seam::kernels::internal
