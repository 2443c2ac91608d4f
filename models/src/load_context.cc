// LoadContext's loads (read on the host, placed on the rank's device) and
// the row helper.
#include "src/load_context.h"

#include "seam/core/logging.h"
#include "seam/core/status.h"
#include "seam/kernels/ops.h"
#include "seam/weights/output_head.h"

namespace seam::models::internal {

absl::StatusOr<Tensor> LoadContext::Place(const Tensor& host) const { return host.On(device); }

absl::StatusOr<Tensor> LoadContext::Load(const std::string& name, const Shape& shape) const {
  SEAM_ASSIGN_OR_RETURN(Tensor t, checkpoint.Load(name, shape, dtype));
  return Place(t);
}

absl::StatusOr<Tensor> LoadContext::LoadRows(const std::string& name, const Shape& shape, int part, int parts) const {
  SEAM_ASSIGN_OR_RETURN(Tensor t, checkpoint.LoadRows(name, shape, part, parts, dtype));
  return Place(t);
}

absl::StatusOr<Tensor> LoadContext::LoadCols(const std::string& name, const Shape& shape, int part, int parts) const {
  SEAM_ASSIGN_OR_RETURN(Tensor t, checkpoint.LoadCols(name, shape, part, parts, dtype));
  return Place(t);
}

absl::Status LoadEmbeddingAndHead(const LoadContext& ctx, const std::string& embedding, bool first_piece,
                                  bool last_piece, Tensor* embed, Tensor* lm_head) {
  const weights::ModelConfig& c = ctx.config;
  const Shape shape{c.vocab_size, c.hidden_size};
  if (first_piece) {
    SEAM_ASSIGN_OR_RETURN(*embed, ctx.Load(embedding, shape));
  }
  if (!last_piece) return absl::OkStatus();
  SEAM_ASSIGN_OR_RETURN(const weights::OutputHead head, weights::ResolveOutputHead(ctx.checkpoint, embedding));
  if (!head.disagreement.empty() && ctx.topology.tp_rank == 0) SEAM_LOG_WARN("{}", head.disagreement);
  if (head.is_embedding && first_piece) {
    *lm_head = *embed;
    return absl::OkStatus();
  }
  SEAM_ASSIGN_OR_RETURN(*lm_head, ctx.Load(head.tensor, shape));
  return absl::OkStatus();
}

Tensor ConcatRows(const Tensor& a, const Tensor& b) {
  SEAM_CHECK(a.rank() == 2 && b.rank() == 2 && a.dim(1) == b.dim(1) && a.dtype() == b.dtype());
  Tensor out = Tensor::Empty({a.rows() + b.rows(), a.dim(1)}, a.dtype(), a.device());
  SEAM_CHECK_OK(CopyInto(a, out.Rows(0, a.rows())));
  SEAM_CHECK_OK(CopyInto(b, out.Rows(a.rows(), b.rows())));
  return out;
}

}  // namespace seam::models::internal
