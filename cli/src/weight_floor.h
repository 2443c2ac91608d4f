// The weight-bytes floor of a decode step: the bytes of weights one step must
// read, and the memory bandwidth they are read at, measured in the same run
// with a large copy (host memcpy on every core, or a device-to-device copy).
#pragma once

#include <cstddef>

#include "absl/status/statusor.h"
#include "seam/core/device.h"
#include "seam/core/dtype.h"
#include "seam/weights/model_config.h"

namespace seam::cli {

// Bytes of weights one decode step reads in `dtype`: every tensor of the
// checkpoint's layout but the embedding table (a step reads one row per
// sequence; with tied embeddings the lm_head reads it whole and it counts),
// with only num_experts_per_tok of each MoE layer's experts (the fewest a
// step can touch), so the floor stays a lower bound.
double DecodeStepWeightBytes(const weights::ModelConfig& config, DType dtype);

// Memory traffic in bytes/s of copying `bytes` host to host, split over
// `threads` threads, best of a few repeats; a copy counts its bytes twice
// (read and written), as the GPU figure does. INTERNAL when memory is short.
absl::StatusOr<double> HostCopyBytesPerSecond(size_t bytes, int threads);

// The same for a device-to-device copy of `bytes` on one GPU.
// FAILED_PRECONDITION without the CUDA path or a GPU.
absl::StatusOr<double> DeviceCopyBytesPerSecond(Device device, size_t bytes);

}  // namespace seam::cli
