// CUDA launchers of seam/kernels/mhc.h (internal to kernels/; mhc.cu). Same
// contracts; arguments already validated by the dispatcher.
#pragma once

#include <vector>

#include "absl/status/status.h"
#include "seam/core/tensor.h"

namespace seam::kernels::cuda {

absl::Status MhcPostMix(const Tensor& residual, const Tensor& y, const std::vector<float>& res,
                        const std::vector<float>& post);
absl::Status MhcPreMix(const Tensor& residual, const std::vector<float>& pre, const Tensor& out);

}  // namespace seam::kernels::cuda
