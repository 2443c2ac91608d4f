// Argument checks shared by the op dispatchers: dtype families, ranks and
// dimensions, and the rule that every tensor of one call sits on one device.
// Every failure is INVALID_ARGUMENT and names the argument and the sizes.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "seam/core/tensor.h"
#include "seam/kernels/ops.h"

namespace seam::kernels::internal {

// A tensor with the name the caller knows it by, for messages.
using Named = std::pair<const Tensor*, const char*>;

// Defined, contiguous, and of a floating storage dtype arithmetic reads as
// fp32: f32, bf16 or f16.
absl::Status ExpectFloatTensor(const Tensor& t, const char* what);
// Defined, contiguous, i32.
absl::Status ExpectIndexTensor(const Tensor& t, const char* what);
// Size of dimension `dim` equals `size`: "what: expected dim 1 of size 96, got [7, 95]".
absl::Status ExpectDimSize(const Tensor& t, int dim, int64_t size, const char* what);
// The index tensors of an AttentionBatch: i32 context_lens [B], query_start
// [B + 1] and block_tables [B, max_blocks] (their values are checked by the
// implementations).
absl::Status ExpectAttentionBatch(const AttentionBatch& batch);
// The one device all `tensors` live on, or INVALID_ARGUMENT naming the two
// arguments that disagree.
absl::StatusOr<Device> CommonDevice(std::initializer_list<Named> tensors);
// UNIMPLEMENTED "<op> has no CUDA kernel yet" (or a build-without-CUDA message).
absl::Status NoCudaKernel(const char* op);

}  // namespace seam::kernels::internal
