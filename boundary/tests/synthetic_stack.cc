#include "synthetic_stack.h"

#include <cmath>

#include "declared_reads.h"
#include "seam/boundary/output_transform.h"
#include "seam/boundary/replicated_component.h"
#include "seam/boundary/stream_ops.h"
#include "seam/comm/communicator.h"
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
               bool relu, bool exact) {
  std::vector<float> x = input.ToFloats();
  if (exact) {
    for (float& v : x) v = ToGrid(v);
  }
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

// The compute input every attention-TP rank holds alike: a non-gathering
// mixer gathers the slice it was handed (here, an unpadded all-gather).
absl::StatusOr<Tensor> GatherOwnInput(const Tensor& x, ForwardBatch& batch) {
  const int64_t dp_rows = batch.rows.RowsOf(RowForm::kDpRows);
  // Prepare left the residual on the rows it handed over.
  if (batch.stream->residual_form() != RowForm::kAttnTpSlice || batch.rows.topology().attn_tp() == 1) return x;
  Tensor out = Tensor::Empty({dp_rows, x.dim(1)}, x.dtype(), x.device());
  SEAM_RETURN_IF_ERROR(batch.comms.attn_tp->AllGatherV(x, batch.rows.AttnTpSliceCounts(), out));
  return out;
}

bool IsFfn(char kind) {
  return kind == 'F' || kind == 'C' || kind == 'T' || kind == 'E' || kind == 'B' || kind == 'L';
}

constexpr int64_t kTopK = 2;
constexpr float kScales[kTopK] = {0.5f, 0.75f};

// The MoE's expert outputs [rows, K, H] from the dense output: e_k = (k + 1) · dense.
Tensor ExpertOutputs(const Tensor& dense) {
  const int64_t rows = dense.rows();
  std::vector<float> d = dense.ToFloats(), e(rows * kTopK * kHidden);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t k = 0; k < kTopK; ++k)
      for (int64_t i = 0; i < kHidden; ++i) e[(r * kTopK + k) * kHidden + i] = static_cast<float>(k + 1) * d[r * kHidden + i];
  return Tensor::FromFloats(e, {rows, kTopK, kHidden});
}

// The producer's unfused finalize: Σ_k scale_k · e_k in fp32, k order.
Tensor Finalize(const Tensor& experts) {
  const int64_t rows = experts.dim(0);
  std::vector<float> e = experts.ToFloats(), out(rows * kHidden, 0.0f);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t k = 0; k < kTopK; ++k)
      for (int64_t i = 0; i < kHidden; ++i) out[r * kHidden + i] += kScales[k] * e[(r * kTopK + k) * kHidden + i];
  return Tensor::FromFloats(out, {rows, kHidden});
}

std::shared_ptr<const DeferredFinalize> Handoff(const Tensor& experts) {
  std::vector<float> s;
  for (int64_t r = 0; r < experts.dim(0); ++r) s.insert(s.end(), kScales, kScales + kTopK);
  return std::make_shared<DeferredFinalize>(experts, Tensor::FromFloats(s, {experts.dim(0), kTopK}),
                                            [experts]() -> absl::StatusOr<Tensor> { return Finalize(experts); });
}

}  // namespace

MhcCoefficients MhcCoefficientsOf(uint64_t seed, int layer, int index, int streams) {
  MhcCoefficients c;
  c.streams = streams;
  const uint64_t s = seed * 7919 + (layer + 1) * 97 + index * 13;
  c.pre = DyadicValues(s + 1, streams, 0.25f, 1.0f);
  c.post = DyadicValues(s + 2, streams, 0.25f, 1.0f);
  // Doubly stochastic: each stream keeps half of itself and takes half of a neighbour.
  c.res.assign(streams * streams, 0.0f);
  const int shift = 1 + static_cast<int>(s % 2);
  for (int i = 0; i < streams; ++i) {
    c.res[i * streams + i] += 0.5f;
    c.res[i * streams + (i + shift) % streams] += 0.5f;
  }
  return c;
}

namespace {
class ExitAppliedAdd final : public ResidualUpdate {
 public:
  UpdateCaps caps() const override { return UpdateCaps{true, true}; }
  std::string name() const override { return "plain_add_at_exit"; }
  absl::Status Apply(const Tensor& c, const Tensor& r) const override { return PlainAddUpdate()->Apply(c, r); }
};

struct DeclFlags {
  int streams = 0;
  bool applied_at_exit = false;
  bool reads_all_rows = false;
  bool gathering_reads = false;
  bool ffn_reads_after_dp_gather = false;
  bool output_transform = false;
};

// Halves the positive part of the contribution: exact on the dyadic grid,
// and not linear, so applying it to a partial sum would show.
class HalfTransform final : public OutputTransform {
 public:
  std::string name() const override { return "relu_half"; }
  absl::Status Apply(const Tensor& c) const override {
    std::vector<float> v = c.ToFloats();
    for (float& x : v) x = std::fmax(x, 0.0f) * 0.5f;
    return CopyInto(Tensor::FromFloats(v, c.shape(), c.dtype()), c);
  }
};

// A stage declaration of `kind` with the stack's update and read choices.
StageDeclaration StackDeclaration(char kind, uint64_t seed, int layer, int index, DeclFlags flags) {
  StageDeclaration d = DeclarationOf(kind);
  const int streams = flags.streams;
  if (flags.applied_at_exit) d.update = std::make_shared<ExitAppliedAdd>();
  if (flags.reads_all_rows && (kind == 'A' || kind == 'M')) d.readout_caps.reads_after_attn_tp_gather = true;
  if (flags.gathering_reads && (kind == 'A' || kind == 'M')) d.readout_caps.gathering_reads = true;
  if (flags.ffn_reads_after_dp_gather && IsFfn(kind)) d.readout_caps.reads_before_dp_gather = false;
  if (flags.output_transform && kind == 'F') d.update = TransformedUpdate(d.update, std::make_shared<HalfTransform>());
  if (streams > 0) {
    d.update = *MhcUpdate::Make(MhcCoefficientsOf(seed, layer, index, streams));
    d.readout_caps = MhcRead::Caps();
  }
  return d;
}
}  // namespace

StageDeclaration DeclarationOf(char kind) {
  switch (kind) {
    case 'A': return DeclareAttn();
    case 'M': return DeclareAttn({ProducerReduction::kExitScoped});
    case 'N': return DeclareAttn({ProducerReduction::kExitScoped, /*gathers_attn_tp_input=*/false});
    case 'C': return DeclareFfn({/*sparse=*/false, /*output_complete=*/true});
    case 'E': return DeclareFfn({/*sparse=*/true});
    case 'B': return DeclareFfn({/*sparse=*/true, /*output_complete=*/false, /*merges_branch=*/true});
    case 'L': {
      FfnDeclOptions o;
      o.defers_only_with_provider = true;
      return DeclareFfn(o);
    }
    default: return DeclareFfn();
  }
}

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
  stack->exact_ = config.exact;
  stack->causal_mix_ = config.causal_mix;
  stack->finalize_norm_ = config.finalize_norm;
  stack->capture_ = config.capture;
  stack->final_gather_ = config.final_gather;
  const int end = config.end_layer < 0 ? config.layers : config.end_layer;
  stack->layers_.resize(end - config.first_layer);
  stack->final_norm_ = MakeNorm(config.seed * 31 + 5);
  const std::string pattern = config.pattern;
  const uint64_t seed = config.seed;
  const int streams = config.mhc_streams;
  const DeclFlags flags{streams, config.applied_at_exit, config.reads_all_rows, config.gathering_reads,
                        config.ffn_reads_after_dp_gather, config.output_transform};
  StageFactsFn facts = [pattern, seed, flags](int layer) {
    std::vector<StageDeclaration> stages;
    for (size_t i = 0; i < pattern.size(); ++i) stages.push_back(StackDeclaration(pattern[i], seed, layer, i, flags));
    return stages;
  };
  if (streams > 0) {
    SEAM_ASSIGN_OR_RETURN(stack->final_read_,
                          MhcRead::Make(MhcCoefficientsOf(seed, -1, 0, streams), &stack->final_norm_));
  }
  LayerStackOptions stack_options{topology, config.policy, facts, config.first_layer, end, config.layers};
  stack_options.final_read.reads_after_attn_tp_gather = config.reads_all_rows;
  if (config.gathering_reads && streams == 0) {
    stack_options.final_read.gathering_reads = true;
    stack->final_read_ = std::make_shared<DeclaredRead>(
        &stack->final_norm_, stack_options.final_read,
        std::vector<std::shared_ptr<GatheringRead>>{DecliningGatheringRead(), GatherThenNormRead(&stack->final_norm_)});
  }
  LayerStack scope(std::move(stack_options));
  for (int l = config.first_layer; l < end; ++l) {
    Layer& layer = stack->layers_[l - config.first_layer];
    layer.stages.resize(config.pattern.size());
    std::vector<StageItem> items;
    auto make = [&](Stage& st, char kind, uint64_t s) {
      st.kind = kind;
      st.norm = MakeNorm(s + 1);
      const bool ffn = IsFfn(st.kind);
      const int64_t inner = ffn ? kFfnInner : kAttnInner;
      const int64_t shard = ffn ? kFfnInner / topology.tp : kAttnInner / topology.attn_tp();
      const int64_t b = (ffn ? topology.tp_rank : topology.attn_tp_rank()) * shard;
      st.w_in = Shard(DyadicValues(s + 3, inner * kHidden, 0.25f, 1.0f), inner, kHidden, b, b + shard, false);
      st.w_out = Shard(DyadicValues(s + 4, kHidden * inner, 0.125f, 0.5f), kHidden, inner, b, b + shard, true);
      if (!config.exact) {
        for (float& w : st.w_in) w /= 3.0f;
        for (float& w : st.w_out) w /= 3.0f;
      }
    };
    for (size_t i = 0; i < config.pattern.size(); ++i) {
      Stage& st = layer.stages[i];
      const uint64_t s = config.seed * 1000 + l * 40 + i * 8;
      make(st, config.pattern[i], s);
      StageOptions options;
      if (st.kind == 'E' || st.kind == 'L') options.fusions = config.fusions;
      const StageDeclaration decl = StackDeclaration(st.kind, seed, l, i, flags);
      if (streams > 0) {
        SEAM_ASSIGN_OR_RETURN(st.read, MhcRead::Make(MhcCoefficientsOf(seed, l, i, streams), &st.norm));
      } else if (decl.readout_caps.gathering_reads || !decl.readout_caps.reads_before_dp_gather) {
        std::vector<std::shared_ptr<GatheringRead>> gathering;
        if (decl.readout_caps.gathering_reads) gathering = {DecliningGatheringRead(), GatherThenNormRead(&st.norm)};
        st.read = std::make_shared<DeclaredRead>(&st.norm, decl.readout_caps, std::move(gathering));
      }
      items.push_back(StageItem{decl, &st.norm, options, st.read});
    }
    SEAM_ASSIGN_OR_RETURN(auto boundaries, AppendStagesAt(__FILE__, __LINE__, l, std::move(items)));
    for (size_t i = 0; i < boundaries.size(); ++i) layer.stages[i].boundary = boundaries[i];
    for (size_t i = 0; i < boundaries.size(); ++i) {
      Stage& st = layer.stages[i];
      if (st.kind != 'B') continue;
      st.branch.resize(3);
      std::vector<StageItem> branch_items;
      const char kinds[] = {'F', 'A', 'F'};
      for (int j = 0; j < 3; ++j) {
        make(st.branch[j], kinds[j], config.seed * 1000 + l * 40 + i * 8 + 500 + j * 8);
        // The first stage's norm is never applied (the source already read): pass the source's.
        branch_items.push_back(StageItem{DeclarationOf(kinds[j]), j == 0 ? &st.norm : &st.branch[j].norm});
      }
      SEAM_ASSIGN_OR_RETURN(auto b, AppendBranchAt(__FILE__, __LINE__, l, *st.boundary, std::move(branch_items)));
      for (int j = 0; j < 3; ++j) st.branch[j].boundary = b[j];
    }
  }
  SEAM_RETURN_IF_ERROR(scope.Close());
  return stack;
}

FinalNormOptions SyntheticStack::FinalOptions() const {
  FinalNormOptions o{true, finalize_norm_, final_read_.get()};
  if (capture_) o.capture = final_captured_.capture();
  o.attn_tp_gather = final_gather_;
  return o;
}

absl::StatusOr<Tensor> SyntheticStack::Forward(ForwardBatch& batch, const Tensor& input) const {
  SEAM_ASSIGN_OR_RETURN(Hidden h, Start(batch, input));
  SEAM_ASSIGN_OR_RETURN(h, RunLayers(batch, h));
  return FinalNorm(h, batch, final_norm_, FinalOptions());
}

absl::StatusOr<PipelineTensors> SyntheticStack::ForwardToPp(ForwardBatch& batch, const Tensor& input) const {
  SEAM_ASSIGN_OR_RETURN(Hidden h, Start(batch, input));
  SEAM_ASSIGN_OR_RETURN(h, RunLayers(batch, h));
  return ToPp(h, batch);
}

absl::StatusOr<PipelineTensors> SyntheticStack::ForwardBetween(ForwardBatch& batch, const PipelineTensors& in) const {
  SEAM_ASSIGN_OR_RETURN(Hidden h, FromPp(in, batch, first_stage()));
  SEAM_ASSIGN_OR_RETURN(h, RunLayers(batch, h));
  return ToPp(h, batch);
}

absl::StatusOr<Tensor> SyntheticStack::ForwardFromPp(ForwardBatch& batch, const PipelineTensors& in) const {
  SEAM_ASSIGN_OR_RETURN(Hidden h, FromPp(in, batch, first_stage()));
  SEAM_ASSIGN_OR_RETURN(h, RunLayers(batch, h));
  return FinalNorm(h, batch, final_norm_, FinalOptions());
}

absl::StatusOr<Hidden> SyntheticStack::RunLayers(ForwardBatch& batch, Hidden h) const {
  for (const Layer& layer : layers_) {
    for (const Stage& st : layer.stages) {
      SEAM_ASSIGN_OR_RETURN(h, RunStage(st, batch, h));
    }
  }
  return h;
}

absl::StatusOr<Hidden> SyntheticStack::RunStage(const Stage& st, ForwardBatch& batch, Hidden h) const {
  // An operation-scheduled microbatch (two-batch overlap) completes every FFN now.
  const bool scheduled = batch.operation_scheduled && IsFfn(st.kind);
  const bool ffn = IsFfn(st.kind);
  const int64_t shard = ffn ? kFfnInner / topology_.tp : kAttnInner / topology_.attn_tp();
  PrepareCapture capture;
  if (capture_ && !ffn) capture = PrepareCapture{captured_.capture(), gathered_.capture()};
  SEAM_ASSIGN_OR_RETURN(Tensor x, st.boundary->Prepare(h, batch, capture));
  if (st.kind == 'N') {
    SEAM_ASSIGN_OR_RETURN(x, GatherOwnInput(x, batch));
  }
  if (st.kind == 'A' && causal_mix_) {
    SEAM_ASSIGN_OR_RETURN(x, CausalMix(x, batch));
  }
  Tensor out = Compute(x, st.w_in, shard, st.w_out, ffn, exact_);
  if (st.kind == 'C') {  // compute completes its own sum over TP
    SEAM_RETURN_IF_ERROR(batch.comms.tp->AllReduce(out));
  }
  if (st.kind == 'B' && scheduled) {
    return absl::UnimplementedError("a prepared branch is not run operation-scheduled");
  }
  if (st.kind == 'E') {
    const Tensor experts = ExpertOutputs(out);
    if (scheduled) return st.boundary->CompleteNow(Finalize(experts), batch);
    if (!st.boundary->has_fusions()) {
      return st.boundary->Finish(Finalize(experts), batch);
    }
    SEAM_ASSIGN_OR_RETURN(auto scope, st.boundary->Exit(batch));
    if (scope->defer_moe_finalize()) {
      return scope->FinishDeferred(Handoff(experts));
    }
    return scope->Finish(Finalize(experts));
  }
  if (st.kind == 'L') {
    // The LoRA-like part: every rank computes it in full from the input it holds alike.
    std::vector<float> lora = x.ToFloats();
    for (float& v : lora) v = ToGrid(v) / 4;
    SEAM_ASSIGN_OR_RETURN(out, AddReplicatedOnSumRankZero(out, Tensor::FromFloats(lora, out.shape()), *st.boundary,
                                                          batch));
    if (scheduled) return st.boundary->CompleteNow(out, batch);
    if (st.boundary->has_fusions()) {
      SEAM_ASSIGN_OR_RETURN(auto scope, st.boundary->Exit(batch));
      return scope->Finish(out);
    }
    return st.boundary->Finish(out, batch);
  }
  if (st.kind == 'B') {
    SEAM_ASSIGN_OR_RETURN(BranchFork fork, BranchInput(*st.branch[0].boundary, x, batch));
    Tensor bx = fork.input;
    Hidden bh;
    for (size_t j = 0; j < st.branch.size(); ++j) {
      const Stage& b = st.branch[j];
      if (j > 0) {
        SEAM_ASSIGN_OR_RETURN(bx, b.boundary->Prepare(bh, fork.batch));
      }
      const bool bffn = IsFfn(b.kind);
      const int64_t bshard = bffn ? kFfnInner / topology_.tp : kAttnInner / topology_.attn_tp();
      SEAM_ASSIGN_OR_RETURN(bh, b.boundary->Finish(Compute(bx, b.w_in, bshard, b.w_out, bffn, exact_), fork.batch));
    }
    SEAM_ASSIGN_OR_RETURN(BranchResult merged, BranchOutput(bh, fork.batch));
    SEAM_ASSIGN_OR_RETURN(h, st.boundary->Finish(Finalize(ExpertOutputs(out)), batch));
    return MergeBranch(h, batch, merged);
  }
  if (st.kind == 'T' || scheduled) {
    SEAM_ASSIGN_OR_RETURN(h, st.boundary->CompleteNow(out, batch));
    if (h.owes_sum() || (batch.stream->pending() != nullptr && batch.stream->pending()->owed != SumGroup::kNone)) {
      return absl::InternalError("CompleteNow left a sum owed");
    }
    return h;
  }
  return st.boundary->Finish(out, batch);
}

absl::StatusOr<Tensor> CausalMix(const Tensor& x, ForwardBatch& batch) {
  std::vector<float> keys = x.ToFloats();
  for (float& v : keys) v = ToGrid(v);
  SEAM_ASSIGN_OR_RETURN(Tensor context, GatherContext(Tensor::FromFloats(keys, x.shape()), batch));
  const std::vector<float> all = context.ToFloats();
  std::vector<float> out(keys.size());
  int64_t local = 0;
  for (const CpChunk& chunk : ComputeChunks(batch)) {
    for (int64_t i = 0; i < chunk.rows; ++i, ++local) {
      const int64_t row = chunk.begin + i, first = row - chunk.offset - i;
      for (int64_t h = 0; h < kHidden; ++h) {
        float prefix = 0.0f;
        for (int64_t j = first; j <= row; ++j) prefix += all[j * kHidden + h];
        out[local * kHidden + h] = keys[local * kHidden + h] + prefix / 32.0f;
      }
    }
  }
  if (local != x.rows()) return absl::InternalError("causal mix: the chunks do not cover the compute rows");
  return Tensor::FromFloats(out, x.shape());
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
