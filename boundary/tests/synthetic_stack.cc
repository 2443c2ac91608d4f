#include "synthetic_stack.h"

#include <cmath>

#include "seam/boundary/stream_ops.h"
#include "seam/core/status.h"

namespace seam::boundary::testing {
namespace {

uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// Rounds onto the 1/8 grid and clamps to [-4, 4]: keeps compute exact after the norm.
float ToGrid(float v) { return std::fmin(4.0f, std::fmax(-4.0f, std::nearbyint(v * 8.0f) / 8.0f)); }

// out[r, o] = Σ_i in[r, i] · w[o, i] (w row-major [outs, ins]); plain loops, exact here.
std::vector<float> Linear(const std::vector<float>& in, int64_t rows, int64_t ins, const std::vector<float>& w,
                          int64_t outs) {
  std::vector<float> out(rows * outs, 0.0f);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t o = 0; o < outs; ++o) {
      float acc = 0.0f;
      for (int64_t i = 0; i < ins; ++i) acc += in[r * ins + i] * w[o * ins + i];
      out[r * outs + o] = acc;
    }
  }
  return out;
}

// Rows [begin, end) of a row-major [rows, cols] matrix; or columns when `cols_slice`.
std::vector<float> Shard(const std::vector<float>& full, int64_t rows, int64_t cols, int64_t begin, int64_t end,
                         bool cols_slice) {
  std::vector<float> out;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      const bool keep = cols_slice ? (c >= begin && c < end) : (r >= begin && r < end);
      if (keep) out.push_back(full[r * cols + c]);
    }
  }
  return out;
}

Tensor Compute(const Tensor& input, const std::vector<float>& w_in, int64_t inner, const std::vector<float>& w_out,
               bool relu) {
  std::vector<float> x = input.ToFloats();
  for (float& v : x) v = ToGrid(v);
  const int64_t rows = input.rows();
  std::vector<float> h = Linear(x, rows, kHidden, w_in, inner);
  if (relu) {
    for (float& v : h) v = std::fmax(v, 0.0f);
  }
  return Tensor::FromFloats(Linear(h, rows, inner, w_out, kHidden), {rows, kHidden});
}

NormParams MakeNorm(uint64_t seed) {
  NormParams n;
  n.weight = Tensor::FromFloats(DyadicValues(seed, kHidden, 0.25f, 2.0f), {kHidden});
  for (int64_t i = 0; i < kHidden; ++i) {
    if (n.weight.data<float>()[i] == 0.0f) n.weight.data<float>()[i] = 1.0f;
  }
  n.eps = 1.0f / 1024;
  return n;
}

}  // namespace

std::vector<float> DyadicValues(uint64_t seed, int64_t count, float step, float limit) {
  const int64_t levels = static_cast<int64_t>(limit / step);
  std::vector<float> v(count);
  for (int64_t i = 0; i < count; ++i) {
    const int64_t k = static_cast<int64_t>(Mix(seed * 1000003 + i) % (2 * levels + 1)) - levels;
    v[i] = k == 0 ? step : static_cast<float>(k) * step;
  }
  return v;
}

absl::StatusOr<std::unique_ptr<SyntheticStack>> SyntheticStack::Build(const StackConfig& config,
                                                                      const Topology& topology) {
  auto stack = std::unique_ptr<SyntheticStack>(new SyntheticStack());
  stack->topology_ = topology;
  stack->layers_.resize(config.layers);
  stack->final_norm_ = MakeNorm(config.seed * 31 + 5);
  LayerStack scope(LayerStackOptions{topology, config.policy});
  const int64_t attn_shard = kAttnInner / topology.attn_tp(), ffn_shard = kFfnInner / topology.tp;
  for (int l = 0; l < config.layers; ++l) {
    Layer& layer = stack->layers_[l];
    const uint64_t s = config.seed * 100 + l * 10;
    layer.attn_norm = MakeNorm(s + 1);
    layer.ffn_norm = MakeNorm(s + 2);
    const int64_t a0 = topology.attn_tp_rank() * attn_shard, f0 = topology.tp_rank * ffn_shard;
    layer.wq = Shard(DyadicValues(s + 3, kAttnInner * kHidden, 0.25f, 1.0f), kAttnInner, kHidden, a0,
                     a0 + attn_shard, false);
    layer.wo = Shard(DyadicValues(s + 4, kHidden * kAttnInner, 0.125f, 0.5f), kHidden, kAttnInner, a0,
                     a0 + attn_shard, true);
    layer.w1 = Shard(DyadicValues(s + 5, kFfnInner * kHidden, 0.25f, 1.0f), kFfnInner, kHidden, f0, f0 + ffn_shard,
                     false);
    layer.w2 = Shard(DyadicValues(s + 6, kHidden * kFfnInner, 0.125f, 0.5f), kHidden, kFfnInner, f0,
                     f0 + ffn_shard, true);
    SEAM_ASSIGN_OR_RETURN(auto boundaries, SEAM_APPEND_STAGES(l, StageItem{DeclareAttn(), &layer.attn_norm},
                                                              StageItem{DeclareFfn(), &layer.ffn_norm}));
    layer.attn = boundaries[0];
    layer.ffn = boundaries[1];
  }
  SEAM_RETURN_IF_ERROR(scope.Close());
  return stack;
}

absl::StatusOr<Tensor> SyntheticStack::Forward(ForwardBatch& batch, const Tensor& input) const {
  const int64_t attn_shard = kAttnInner / topology_.attn_tp(), ffn_shard = kFfnInner / topology_.tp;
  SEAM_ASSIGN_OR_RETURN(Hidden h, Start(batch, input));
  for (const Layer& layer : layers_) {
    SEAM_ASSIGN_OR_RETURN(Tensor x, layer.attn->Prepare(h, batch));
    SEAM_ASSIGN_OR_RETURN(h, layer.attn->Finish(Compute(x, layer.wq, attn_shard, layer.wo, false), batch));
    SEAM_ASSIGN_OR_RETURN(x, layer.ffn->Prepare(h, batch));
    SEAM_ASSIGN_OR_RETURN(h, layer.ffn->Finish(Compute(x, layer.w1, ffn_shard, layer.w2, true), batch));
  }
  return FinalNorm(h, batch, final_norm_);
}

Tensor StackInput(uint64_t seed, int64_t rows) {
  return Tensor::FromFloats(DyadicValues(seed, rows * kHidden, 0.125f, 2.0f), {rows, kHidden});
}

Tensor RankInput(const Tensor& all_rows, const BatchRows& rows, BatchVariant variant) {
  int64_t offset = 0;
  const int dp = rows.topology().dp_rank();
  for (int d = 0; d < dp; ++d) offset += rows.dp_rows()[d];
  Tensor mine = all_rows.Rows(offset, rows.my_dp_rows());
  if (variant == BatchVariant::kInputScattered) mine = mine.Rows(rows.my_slice_begin(), rows.my_slice_rows());
  return mine.Clone();
}

}  // namespace seam::boundary::testing
