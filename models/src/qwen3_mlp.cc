// The dense Qwen3 MLP on one TP rank (gate/up rows and down columns of this
// rank's intermediate slice).
#include <utility>

#include "absl/strings/str_cat.h"
#include "seam/core/status.h"
#include "seam/kernels/ops.h"
#include "src/qwen3_layers.h"

namespace seam::models::internal {

std::string LayerName(int64_t layer, const std::string& suffix) {
  return absl::StrCat("model.layers.", layer, ".", suffix);
}

absl::StatusOr<std::pair<Tensor, Tensor>> DenseMlp::LoadHost(const LoadContext& ctx, const std::string& prefix,
                                                              int64_t intermediate) {
  const int64_t h = ctx.config.hidden_size;
  const int r = ctx.options.topology.tp_rank, tp = ctx.options.topology.tp;
  if (intermediate % tp != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(prefix, ": intermediate size ", intermediate, " does not divide over TP ", tp));
  }
  const weights::Checkpoint& ck = ctx.checkpoint;
  SEAM_ASSIGN_OR_RETURN(Tensor gate, ck.LoadRows(prefix + ".gate_proj.weight", {intermediate, h}, r, tp, ctx.options.dtype));
  SEAM_ASSIGN_OR_RETURN(Tensor up, ck.LoadRows(prefix + ".up_proj.weight", {intermediate, h}, r, tp, ctx.options.dtype));
  SEAM_ASSIGN_OR_RETURN(Tensor down, ck.LoadCols(prefix + ".down_proj.weight", {h, intermediate}, r, tp, ctx.options.dtype));
  return std::pair{ConcatRows(gate, up), std::move(down)};
}

absl::StatusOr<DenseMlp> DenseMlp::Load(const LoadContext& ctx, const std::string& prefix, int64_t intermediate) {
  SEAM_ASSIGN_OR_RETURN(auto host, LoadHost(ctx, prefix, intermediate));
  DenseMlp mlp;
  SEAM_ASSIGN_OR_RETURN(mlp.gate_up_, ctx.Place(host.first));
  SEAM_ASSIGN_OR_RETURN(mlp.down_, ctx.Place(host.second));
  return mlp;
}

absl::StatusOr<Tensor> DenseMlp::Forward(const Tensor& x) const {
  const int64_t n = x.rows(), inner = down_.dim(1);
  Tensor out = Tensor::Empty({n, down_.dim(0)}, x.dtype(), x.device());
  if (n == 0) return out;
  Tensor gate_up = Tensor::Empty({n, 2 * inner}, x.dtype(), x.device());
  Tensor act = Tensor::Empty({n, inner}, x.dtype(), x.device());
  SEAM_RETURN_IF_ERROR(kernels::Matmul(x, gate_up_, gate_up));
  SEAM_RETURN_IF_ERROR(kernels::SiluAndMul(gate_up, act));
  SEAM_RETURN_IF_ERROR(kernels::Matmul(act, down_, out));  // partial over TP: never reduced here
  return out;
}

}  // namespace seam::models::internal
