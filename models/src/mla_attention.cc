// LongCat-Flash's multi-head latent attention on one attention-TP rank, in
// the absorbed form over the latent cache (kernels/latent_attention.h).
// Prefill runs the same absorbed path as decode: every query head attends
// over the Dc + Dr latent rows instead of up-projected keys and values.
#include <cmath>

#include "absl/strings/str_cat.h"
#include "seam/core/status.h"
#include "seam/kernels/head_matmul.h"
#include "seam/kernels/latent_attention.h"
#include "seam/kernels/ops.h"
#include "src/longcat_layers.h"

namespace seam::models::internal {
namespace {

// The checkpoint's rope rows are interleaved pairs (x0, x1), (x2, x3), …;
// row j of the result is source row Perm(j): the evens, then the odds.
int64_t DeinterleavedSource(int64_t j, int64_t rope) { return j < rope / 2 ? 2 * j : 2 * (j - rope / 2) + 1; }

// Rows `rows` of a host f32 [R, C] matrix, each scaled by `scale`, as a tensor of `dtype`.
Tensor PickRows(const std::vector<float>& m, int64_t cols, const std::vector<int64_t>& rows, float scale,
                DType dtype) {
  std::vector<float> out;
  out.reserve(rows.size() * cols);
  for (int64_t r : rows) {
    for (int64_t c = 0; c < cols; ++c) out.push_back(m[r * cols + c] * scale);
  }
  return Tensor::FromFloats(out, {static_cast<int64_t>(rows.size()), cols}, dtype);
}

}  // namespace

absl::StatusOr<MlaAttention> MlaAttention::Load(const LoadContext& ctx, const std::string& p) {
  const weights::ModelConfig& c = ctx.config;
  const int a = ctx.options.topology.attn_tp_rank(), atp = ctx.options.topology.attn_tp();
  if (c.num_attention_heads % atp != 0) {
    return absl::InvalidArgumentError(absl::StrCat("num_attention_heads (", c.num_attention_heads,
                                                   ") does not divide over attention TP ", atp));
  }
  const weights::Checkpoint& ck = ctx.checkpoint;
  const DType dt = ctx.options.dtype, f32 = DType::kF32;
  if (dt != f32 && dt != DType::kBF16) {  // kernels::HeadMatmul's dtypes
    return absl::InvalidArgumentError(
        absl::StrCat("dtype: LongCat-Flash's latent attention runs in f32 or bf16, got ", DTypeName(dt)));
  }
  MlaAttention m;
  m.heads_ = c.num_attention_heads / atp;
  m.nope_ = c.qk_nope_head_dim, m.rope_ = c.qk_rope_head_dim, m.v_ = c.v_head_dim, m.dc_ = c.kv_lora_rank;
  m.hidden_ = c.hidden_size;
  m.theta_ = c.rope_theta;
  m.scale_ = 1.0f / std::sqrt(static_cast<float>(m.nope_ + m.rope_));
  const int64_t h = c.hidden_size, ql = c.q_lora_rank, qk = m.nope_ + m.rope_, hl = m.heads_;
  const float q_scale = static_cast<float>(std::sqrt(static_cast<double>(h) / static_cast<double>(ql)));
  const float kv_scale = static_cast<float>(std::sqrt(static_cast<double>(h) / static_cast<double>(m.dc_)));

  SEAM_ASSIGN_OR_RETURN(m.wqa_, ctx.Load(p + "q_a_proj.weight", {ql, h}));
  SEAM_ASSIGN_OR_RETURN(m.q_norm_, ctx.Load(p + "q_a_layernorm.weight", {ql}));
  SEAM_ASSIGN_OR_RETURN(Tensor qb, ck.LoadRows(p + "q_b_proj.weight", {c.num_attention_heads * qk, ql}, a, atp, f32));
  const std::vector<float> qbf = qb.ToFloats();
  std::vector<int64_t> nope_rows, pe_rows;
  for (int64_t head = 0; head < hl; ++head) {
    for (int64_t j = 0; j < m.nope_; ++j) nope_rows.push_back(head * qk + j);
    for (int64_t j = 0; j < m.rope_; ++j) pe_rows.push_back(head * qk + m.nope_ + DeinterleavedSource(j, m.rope_));
  }
  SEAM_ASSIGN_OR_RETURN(m.wq_nope_, ctx.Place(PickRows(qbf, ql, nope_rows, q_scale, dt)));
  SEAM_ASSIGN_OR_RETURN(m.wq_pe_, ctx.Place(PickRows(qbf, ql, pe_rows, q_scale, dt)));

  SEAM_ASSIGN_OR_RETURN(Tensor kva, ck.Load(p + "kv_a_proj_with_mqa.weight", {m.dc_ + m.rope_, h}, f32));
  const std::vector<float> kvaf = kva.ToFloats();
  std::vector<int64_t> c_rows, r_rows;
  for (int64_t j = 0; j < m.dc_; ++j) c_rows.push_back(j);
  for (int64_t j = 0; j < m.rope_; ++j) r_rows.push_back(m.dc_ + DeinterleavedSource(j, m.rope_));
  SEAM_ASSIGN_OR_RETURN(m.wkc_, ctx.Place(PickRows(kvaf, h, c_rows, 1.0f, dt)));
  SEAM_ASSIGN_OR_RETURN(m.wkr_, ctx.Place(PickRows(kvaf, h, r_rows, 1.0f, dt)));
  SEAM_ASSIGN_OR_RETURN(Tensor kv_norm, ck.Load(p + "kv_a_layernorm.weight", {m.dc_}, f32));
  std::vector<float> kv_norm_scaled = kv_norm.ToFloats();
  for (float& w : kv_norm_scaled) w *= kv_scale;
  SEAM_ASSIGN_OR_RETURN(m.kv_norm_, ctx.Place(Tensor::FromFloats(kv_norm_scaled, {m.dc_}, dt)));

  SEAM_ASSIGN_OR_RETURN(Tensor kvb, ck.LoadRows(p + "kv_b_proj.weight",
                                                {c.num_attention_heads * (m.nope_ + m.v_), m.dc_}, a, atp, f32));
  const std::vector<float> kvbf = kvb.ToFloats();
  std::vector<float> uk_t(hl * m.dc_ * m.nope_), uv(hl * m.v_ * m.dc_);
  for (int64_t head = 0; head < hl; ++head) {
    const int64_t base = head * (m.nope_ + m.v_);
    float* uk_h = uk_t.data() + head * m.dc_ * m.nope_;
    for (int64_t j = 0; j < m.nope_; ++j) {
      for (int64_t i = 0; i < m.dc_; ++i) uk_h[i * m.nope_ + j] = kvbf[(base + j) * m.dc_ + i];
    }
    float* uv_h = uv.data() + head * m.v_ * m.dc_;
    for (int64_t j = 0; j < m.v_; ++j) {
      for (int64_t i = 0; i < m.dc_; ++i) uv_h[j * m.dc_ + i] = kvbf[(base + m.nope_ + j) * m.dc_ + i];
    }
  }
  SEAM_ASSIGN_OR_RETURN(m.uk_t_, ctx.Place(Tensor::FromFloats(uk_t, {hl, m.dc_, m.nope_}, dt)));
  SEAM_ASSIGN_OR_RETURN(m.uv_, ctx.Place(Tensor::FromFloats(uv, {hl, m.v_, m.dc_}, dt)));
  SEAM_ASSIGN_OR_RETURN(m.wo_, ctx.LoadCols(p + "o_proj.weight", {h, c.num_attention_heads * m.v_}, a, atp));
  return m;
}

absl::StatusOr<Tensor> MlaAttention::Forward(const Tensor& x, const CacheBatch& step, KvCache& cache,
                                             int64_t cache_layer) const {
  const int64_t t = x.rows(), hl = heads_, row = dc_ + rope_;
  const DType dt = x.dtype();
  const Device dev = x.device();
  constexpr float kLoraNormEps = 1e-6f;  // q_a_layernorm and kv_a_layernorm keep RMSNorm's default
  Tensor qa = Tensor::Empty({t, wqa_.dim(0)}, dt, dev);
  Tensor qn = Tensor::Empty({t, wqa_.dim(0)}, dt, dev);
  SEAM_RETURN_IF_ERROR(kernels::Matmul(x, wqa_, qa));
  SEAM_RETURN_IF_ERROR(kernels::RmsNorm(qa, q_norm_, kLoraNormEps, qn));
  Tensor q_nope = Tensor::Empty({t, hl * nope_}, dt, dev), q_pe = Tensor::Empty({t, hl * rope_}, dt, dev);
  SEAM_RETURN_IF_ERROR(kernels::Matmul(qn, wq_nope_, q_nope));
  SEAM_RETURN_IF_ERROR(kernels::Matmul(qn, wq_pe_, q_pe));
  Tensor kv_a = Tensor::Empty({t, dc_}, dt, dev), k_pe = Tensor::Empty({t, rope_}, dt, dev);
  Tensor kv_c = Tensor::Empty({t, dc_}, dt, dev);
  SEAM_RETURN_IF_ERROR(kernels::Matmul(x, wkc_, kv_a));
  SEAM_RETURN_IF_ERROR(kernels::Matmul(x, wkr_, k_pe));
  SEAM_RETURN_IF_ERROR(kernels::RmsNorm(kv_a, kv_norm_, kLoraNormEps, kv_c));
  SEAM_ASSIGN_OR_RETURN(Tensor q_pe3, q_pe.Reshape({t, hl, rope_}));
  SEAM_ASSIGN_OR_RETURN(Tensor k_pe3, k_pe.Reshape({t, 1, rope_}));
  SEAM_RETURN_IF_ERROR(kernels::RotaryEmbedding(q_pe3, k_pe3, step.positions, theta_, rope_));

  Tensor latent = Tensor::Empty({t, row}, dt, dev);
  SEAM_RETURN_IF_ERROR(CopyInto(kv_c, latent.Narrow(1, 0, dc_)));
  SEAM_RETURN_IF_ERROR(CopyInto(k_pe, latent.Narrow(1, dc_, rope_)));
  SEAM_RETURN_IF_ERROR(kernels::WriteLatentCache(latent, step.slot_mapping, cache.latent(cache_layer)));

  // q_lat [T, hl, Dc + Dr]: per head q_nope · W_UK (all heads in one
  // HeadMatmul, written straight into each head's Dc columns), then q_pe.
  Tensor q_lat = Tensor::Empty({t, hl * row}, dt, dev);
  SEAM_ASSIGN_OR_RETURN(Tensor q3, q_lat.Reshape({t, hl, row}));
  SEAM_ASSIGN_OR_RETURN(Tensor q_nope3, q_nope.Reshape({t, hl, nope_}));
  SEAM_RETURN_IF_ERROR(kernels::HeadMatmul(q_nope3, uk_t_, q3.Narrow(2, 0, dc_)));
  SEAM_ASSIGN_OR_RETURN(Tensor q_rows, q_lat.Reshape({t * hl, row}));
  SEAM_ASSIGN_OR_RETURN(Tensor q_pe_rows, q_pe.Reshape({t * hl, rope_}));
  SEAM_RETURN_IF_ERROR(CopyInto(q_pe_rows, q_rows.Narrow(1, dc_, rope_)));
  Tensor o_lat = Tensor::Empty({t, hl * dc_}, dt, dev);
  SEAM_ASSIGN_OR_RETURN(Tensor o_lat3, o_lat.Reshape({t, hl, dc_}));
  SEAM_RETURN_IF_ERROR(kernels::PagedLatentAttention(q3, cache.latent(cache_layer), step.attention, scale_, o_lat3));

  // o [T, hl, v]: per head o_lat · W_UVᵀ (one HeadMatmul); then o_proj.
  Tensor o = Tensor::Empty({t, hl * v_}, dt, dev);
  SEAM_ASSIGN_OR_RETURN(Tensor o3, o.Reshape({t, hl, v_}));
  SEAM_RETURN_IF_ERROR(kernels::HeadMatmul(o_lat3, uv_, o3));
  Tensor out = Tensor::Empty({t, hidden_}, dt, dev);
  SEAM_RETURN_IF_ERROR(kernels::Matmul(o, wo_, out));  // partial over attention TP
  return out;
}

}  // namespace seam::models::internal
