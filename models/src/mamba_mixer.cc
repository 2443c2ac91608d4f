// Nemotron-H's Mamba2 mixer on one attention-TP rank. The in_proj rows of
// this rank's heads are picked out of each of its five blocks (z, x, B, C,
// dt) and the conv1d channels out of the x, B and C blocks, so the rank
// computes its heads exactly as the whole layer would; only out_proj's sum
// over ranks remains, which the boundary completes.
#include <cmath>

#include "absl/strings/str_cat.h"
#include "seam/core/status.h"
#include "seam/kernels/ops.h"
#include "src/nemotron_h_layers.h"

namespace seam::models::internal {
namespace {

// Rows [begin, begin + count) of a host tensor as a contiguous copy.
Tensor RowSlice(const Tensor& t, int64_t begin, int64_t count) { return t.Rows(begin, count).Clone(); }

// The columns [begin, begin + count) of x [T, W] as a contiguous tensor.
Tensor Columns(const Tensor& x, int64_t begin, int64_t count) { return x.Narrow(1, begin, count).Clone(); }

}  // namespace

NemotronHNames NemotronHNames::Of(const weights::Checkpoint& checkpoint) {
  NemotronHNames n;
  n.prefix = checkpoint.Has("backbone.layers.0.norm.weight") ? "backbone." : "model.";
  n.embedding = checkpoint.Has(n.prefix + "embedding.weight") ? n.prefix + "embedding.weight"
                                                              : n.prefix + "embeddings.weight";
  return n;
}

std::string NemotronHNames::Layer(int64_t layer, const std::string& suffix) const {
  return absl::StrCat(prefix, "layers.", layer, ".", suffix);
}

absl::StatusOr<MambaMixer> MambaMixer::Load(const LoadContext& ctx, const NemotronHNames& names, int64_t layer) {
  const weights::ModelConfig& c = ctx.config;
  const int a = ctx.options.topology.attn_tp_rank(), atp = ctx.options.topology.attn_tp();
  const int64_t hidden = c.hidden_size, inner = c.mamba_intermediate(), heads = c.mamba_num_heads;
  const int64_t gn = c.n_groups * c.ssm_state_size, conv = c.mamba_conv_dim();
  if (heads % atp != 0 || c.n_groups % atp != 0) {
    return absl::InvalidArgumentError(absl::StrCat("layer ", layer, ": mamba_num_heads (", heads, ") and n_groups (",
                                                   c.n_groups, ") must divide over attention TP ", atp));
  }
  MambaMixer m;
  m.heads_ = heads / atp;
  m.head_dim_ = c.mamba_head_dim;
  m.groups_ = c.n_groups / atp;
  m.state_ = c.ssm_state_size;
  m.kernel_ = c.conv_kernel;
  m.hidden_ = hidden;
  m.eps_ = c.rms_norm_eps;
  m.dt_min_ = c.time_step_limit_min;
  m.dt_max_ = c.time_step_limit_max;
  m.scan_ = ctx.options.mamba_scan;
  const int64_t il = inner / atp, gnl = gn / atp, hl = m.heads_;
  const weights::Checkpoint& ck = ctx.checkpoint;
  SEAM_ASSIGN_OR_RETURN(Tensor in, ck.Load(names.Layer(layer, "mixer.in_proj.weight"), {inner + conv + heads, hidden},
                                           ctx.options.dtype));
  // Blocks of in_proj's rows: z [0, I), x [I, 2I), B [2I, 2I + GN), C [2I + GN, 2I + 2GN), dt after.
  SEAM_ASSIGN_OR_RETURN(m.w_z_, ctx.Place(RowSlice(in, a * il, il)));
  const Tensor xbc = ConcatRows(ConcatRows(RowSlice(in, inner + a * il, il), RowSlice(in, 2 * inner + a * gnl, gnl)),
                                RowSlice(in, 2 * inner + gn + a * gnl, gnl));
  SEAM_ASSIGN_OR_RETURN(m.w_xbc_, ctx.Place(xbc));
  SEAM_ASSIGN_OR_RETURN(m.w_dt_, ctx.Place(RowSlice(in, inner + conv + a * hl, hl)));

  SEAM_ASSIGN_OR_RETURN(Tensor conv_w, ck.Load(names.Layer(layer, "mixer.conv1d.weight"), {conv, 1, c.conv_kernel},
                                               DType::kF32));
  SEAM_ASSIGN_OR_RETURN(conv_w, conv_w.Reshape({conv, c.conv_kernel}));
  auto channels = [&](const Tensor& t) {  // this rank's x, B and C channels of a per-channel tensor
    return ConcatRows(ConcatRows(RowSlice(t, a * il, il), RowSlice(t, inner + a * gnl, gnl)),
                      RowSlice(t, inner + gn + a * gnl, gnl));
  };
  SEAM_ASSIGN_OR_RETURN(m.conv_w_, channels(conv_w).On(ctx.options.device));
  if (c.use_conv_bias) {
    SEAM_ASSIGN_OR_RETURN(Tensor bias, ck.Load(names.Layer(layer, "mixer.conv1d.bias"), {conv}, DType::kF32));
    SEAM_ASSIGN_OR_RETURN(bias, bias.Reshape({conv, 1}));
    SEAM_ASSIGN_OR_RETURN(Tensor local, channels(bias).Reshape({il + 2 * gnl}));
    SEAM_ASSIGN_OR_RETURN(m.conv_b_, local.On(ctx.options.device));
  }
  // Per-head parameters stay fp32 whatever the compute dtype.
  SEAM_ASSIGN_OR_RETURN(m.dt_bias_, ck.LoadRows(names.Layer(layer, "mixer.dt_bias"), {heads}, a, atp, DType::kF32));
  SEAM_ASSIGN_OR_RETURN(m.dt_bias_, m.dt_bias_.Clone().On(ctx.options.device));
  SEAM_ASSIGN_OR_RETURN(Tensor a_log, ck.LoadRows(names.Layer(layer, "mixer.A_log"), {heads}, a, atp, DType::kF32));
  std::vector<float> a_values = a_log.ToFloats();
  for (float& v : a_values) v = -std::exp(v);
  SEAM_ASSIGN_OR_RETURN(m.a_, Tensor::FromFloats(a_values, {hl}).On(ctx.options.device));
  SEAM_ASSIGN_OR_RETURN(m.d_, ck.LoadRows(names.Layer(layer, "mixer.D"), {heads}, a, atp, DType::kF32));
  SEAM_ASSIGN_OR_RETURN(m.d_, m.d_.Clone().On(ctx.options.device));
  SEAM_ASSIGN_OR_RETURN(m.norm_, ctx.LoadRows(names.Layer(layer, "mixer.norm.weight"), {inner}, a, atp));
  SEAM_ASSIGN_OR_RETURN(m.w_out_, ctx.LoadCols(names.Layer(layer, "mixer.out_proj.weight"), {hidden, inner}, a, atp));
  return m;
}

MambaStateShape MambaMixer::StateShape(int64_t layers) const {
  return MambaStateShape{layers, kernel_ - 1, heads_ * head_dim_ + 2 * groups_ * state_, heads_, head_dim_, state_};
}

absl::StatusOr<Tensor> MambaMixer::Forward(const Tensor& x, const CacheBatch& step, KvCache& cache,
                                           int64_t state_layer) const {
  const int64_t t = x.rows(), il = heads_ * head_dim_, gnl = groups_ * state_, channels = il + 2 * gnl;
  const DType dt = x.dtype();
  const Device dev = x.device();
  if (cache.states() == nullptr) return absl::InternalError("a Mamba layer's cache holds no Mamba state");
  Tensor z = Tensor::Empty({t, il}, dt, dev), xbc = Tensor::Empty({t, channels}, dt, dev);
  Tensor dt_raw = Tensor::Empty({t, heads_}, dt, dev);
  SEAM_RETURN_IF_ERROR(kernels::Matmul(x, w_z_, z));
  SEAM_RETURN_IF_ERROR(kernels::Matmul(x, w_xbc_, xbc));
  SEAM_RETURN_IF_ERROR(kernels::Matmul(x, w_dt_, dt_raw));
  const kernels::SequenceStates seqs{step.attention.query_start, step.state_slots};
  Tensor conv = Tensor::Empty({t, channels}, dt, dev);
  SEAM_RETURN_IF_ERROR(kernels::CausalConv1d(xbc, conv_w_, conv_b_, /*silu=*/true,
                                             cache.states()->conv(state_layer), seqs, conv));
  kernels::SelectiveScanParams p;
  SEAM_ASSIGN_OR_RETURN(p.x, Columns(conv, 0, il).Reshape({t, heads_, head_dim_}));
  SEAM_ASSIGN_OR_RETURN(p.b, Columns(conv, il, gnl).Reshape({t, groups_, state_}));
  SEAM_ASSIGN_OR_RETURN(p.c, Columns(conv, il + gnl, gnl).Reshape({t, groups_, state_}));
  p.dt = dt_raw;
  p.dt_bias = dt_bias_;
  p.a = a_;
  p.d = d_;
  p.dt_min = dt_min_;
  p.dt_max = dt_max_;
  p.ssm_state = cache.states()->ssm(state_layer);
  p.seqs = seqs;
  p.out = Tensor::Empty({t, heads_, head_dim_}, dt, dev);
  p.algorithm = scan_;
  SEAM_RETURN_IF_ERROR(kernels::SelectiveScan(p));
  SEAM_ASSIGN_OR_RETURN(Tensor y, p.out.Reshape({t, il}));
  Tensor normed = Tensor::Empty({t, il}, dt, dev);
  SEAM_RETURN_IF_ERROR(kernels::GatedRmsNorm(y, z, norm_, il / groups_, eps_, normed));
  Tensor out = Tensor::Empty({t, hidden_}, dt, dev);
  SEAM_RETURN_IF_ERROR(kernels::Matmul(normed, w_out_, out));  // partial over attention TP
  return out;
}

}  // namespace seam::models::internal
