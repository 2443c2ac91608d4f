// Wraps CUDA runtime calls so a failure becomes a Status naming the call,
// the file and the line, e.g. "cudaMalloc(&p, n) failed at x.cc:12: out of memory".
// Include only from code compiled with the CUDA path (SEAM_HAVE_CUDA).
#pragma once

#include <cuda_runtime_api.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace seam {

inline absl::Status CudaStatus(cudaError_t err, const char* call, const char* file, int line) {
  if (err == cudaSuccess) return absl::OkStatus();
  cudaGetLastError();  // clear a non-sticky error so later calls start clean
  const absl::StatusCode code =
      err == cudaErrorMemoryAllocation ? absl::StatusCode::kResourceExhausted
      : (err == cudaErrorNoDevice || err == cudaErrorInsufficientDriver) ? absl::StatusCode::kUnavailable
                                                                          : absl::StatusCode::kInternal;
  return absl::Status(code, absl::StrCat(call, " failed at ", file, ":", line, ": ", cudaGetErrorName(err), " (",
                                         cudaGetErrorString(err), ")"));
}

}  // namespace seam

#define SEAM_CUDA_STATUS(call) ::seam::CudaStatus((call), #call, __FILE__, __LINE__)
#define SEAM_CUDA_RETURN_IF_ERROR(call)                  \
  do {                                                   \
    ::absl::Status _seam_cuda_s = SEAM_CUDA_STATUS(call); \
    if (!_seam_cuda_s.ok()) return _seam_cuda_s;         \
  } while (0)
