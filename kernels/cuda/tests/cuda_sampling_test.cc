// CUDA sampling kernels against the CPU reference (filled in with the kernels).
#include "cuda_test_util.h"
#include "seam/kernels/ops.h"
