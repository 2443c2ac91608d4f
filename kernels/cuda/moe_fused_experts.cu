// ExpertGateUpSilu and ExpertDown on CUDA: the checks every kernel needs
// (one dtype, 16-byte rows and addresses), then the chosen kernel
// (moe_expert_gemv.cu or moe_expert_mma.cu). Nothing is read back to the
// host and the grids come from shapes, so both can be captured in a graph.
#include "cuda_common.cuh"
#include "cuda_ops.h"
#include "moe_expert_gemm.h"

namespace seam::kernels::cuda {
namespace {

const char* KernelName(ExpertKernel kernel) { return kernel == ExpertKernel::kTensorCore ? "tensor-core" : "GEMV"; }

absl::Status Launch(const char* op, const Tensor& x, const Tensor& w, const ExpertGroups& groups, const Tensor& out,
                    ExpertKernel kernel, bool gate_up) {
  const int64_t pairs = groups.pairs(), k = w.dim(2);
  if (pairs == 0 || out.dim(1) == 0) return absl::OkStatus();
  if (!ExpertKernelTakes(kernel, x.dtype(), k) || out.dtype() != x.dtype() || !VecAligned<uint4>(x.raw_data(), 1) ||
      !VecAligned<uint4>(w.raw_data(), 1)) {
    return absl::UnimplementedError(absl::StrCat(
        op, ": the CUDA ", KernelName(kernel), " kernel takes x and w of one dtype (",
        kernel == ExpertKernel::kTensorCore ? "bf16 or f16, K a multiple of 8" : "16-byte rows",
        ") at 16-byte aligned addresses; got x ", DTypeName(x.dtype()), " [", x.dim(0), ", ", k, "]"));
  }
  SEAM_RETURN_IF_ERROR(CheckCurrentDevice(x, op));
  ExpertGemmArgs a;
  a.x = x.raw_data();
  a.w = w.raw_data();
  a.out = out.raw_data();
  a.offsets = groups.offsets.data<int32_t>();
  a.order = groups.order.data<int32_t>();
  a.active = groups.active.data<int32_t>();
  a.tile_starts = groups.tile_starts.data<int32_t>();
  a.weight_rows = w.dim(1);
  a.k = k;
  a.out_cols = out.dim(1);
  a.pairs = pairs;
  a.experts = groups.experts();
  a.per_row = gate_up ? static_cast<int>(pairs / x.dim(0)) : 1;
  a.gate_up = gate_up;
  if (kernel == ExpertKernel::kTensorCore) return LaunchExpertMma(x.dtype(), a, Stream());
  return LaunchExpertGemv(x.dtype(), a, Stream());
}

}  // namespace

absl::Status ExpertGateUpSilu(const Tensor& x, const Tensor& w, const ExpertGroups& groups, const Tensor& act,
                              ExpertKernel kernel) {
  return Launch("ExpertGateUpSilu", x, w, groups, act, kernel, /*gate_up=*/true);
}

absl::Status ExpertDown(const Tensor& act, const Tensor& w, const ExpertGroups& groups, const Tensor& out,
                        ExpertKernel kernel) {
  return Launch("ExpertDown", act, w, groups, out, kernel, /*gate_up=*/false);
}

}  // namespace seam::kernels::cuda
