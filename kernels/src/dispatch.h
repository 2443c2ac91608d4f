// How a validated op reaches its implementation: the CPU reference for host
// tensors, the CUDA launcher (when this build has one) for device tensors.
#pragma once

#include "cpu/cpu_ops.h"
#include "src/validate.h"
#ifdef SEAM_KERNELS_CUDA_LAUNCHERS
#include "cuda/cuda_ops.h"
#endif

// Ops with a CUDA launcher in cuda/cuda_ops.h.
#ifdef SEAM_KERNELS_CUDA_LAUNCHERS
#define SEAM_KERNELS_DISPATCH(device, op, ...)                                  \
  return (device).is_cpu() ? ::seam::kernels::cpu::op(__VA_ARGS__)              \
                           : ::seam::kernels::cuda::op(__VA_ARGS__)
#else
#define SEAM_KERNELS_DISPATCH(device, op, ...)                                  \
  return (device).is_cpu() ? ::seam::kernels::cpu::op(__VA_ARGS__)              \
                           : ::seam::kernels::internal::NoCudaKernel(#op)
#endif
