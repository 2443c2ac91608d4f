// in_process_decode.h: a StageGroup driver and a DecodeGraph driver behind one
// interface, both running the served path's prompts and greedy tokens.
#include "in_process_decode.h"

#include <algorithm>
#include <chrono>
#include <map>

#include "absl/strings/str_cat.h"
#include "seam/boundary/ipc_fusion.h"
#include "seam/core/device_memory.h"
#include "seam/core/status.h"
#include "seam/kernels/ops.h"
#include "seam/kernels/stream.h"
#include "seam/runtime/decode_graph.h"
#include "seam/runtime/stage_group.h"
#include "served_decode.h"

namespace seam::cli {
namespace {

using Clock = std::chrono::steady_clock;
using models::SequenceStep;

double MsSince(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

// KV bytes of max_batch whole sequences in every layer, with room to spare.
int64_t CacheBudget(const weights::ModelConfig& c, const InProcessOptions& o) {
  const int64_t tokens = (o.prompt_len + o.new_tokens + 1 + 15) / 16 * 16;
  const int64_t per_token = 2 * c.num_hidden_layers * c.num_key_value_heads * c.head_dim *
                            static_cast<int64_t>(DTypeSize(o.dtype));
  return per_token * tokens * o.max_batch * 5 / 4 + (int64_t{16} << 20);
}

std::vector<SequenceStep> Prompts(int batch, uint64_t first_id, uint64_t round, const InProcessOptions& o,
                                  int64_t vocab) {
  std::vector<SequenceStep> steps;
  for (int s = 0; s < batch; ++s) {
    // Prompt s on attention-DP group s mod attn_dp, as the coordinator spreads a burst.
    SequenceStep step{first_id + s, {}, 0, s % o.attn_dp};
    for (int t = 0; t < o.prompt_len; ++t) step.tokens.push_back(BenchPromptToken(s, t, round, vocab));
    steps.push_back(std::move(step));
  }
  return steps;
}

// Moves each sequence one token on, to the token `next[i]`.
void Advance(std::vector<SequenceStep>& steps, const std::vector<int32_t>& next) {
  for (size_t i = 0; i < steps.size(); ++i) {
    steps[i].start += static_cast<int64_t>(steps[i].tokens.size());
    steps[i].tokens = {next[i]};
  }
}

// The runtime::StageGroup that the stage servers run, driven step by step.
class GroupDecode : public InProcessDecode {
 public:
  GroupDecode(std::unique_ptr<runtime::StageGroup> group, const InProcessOptions& o)
      : group_(std::move(group)), o_(o) {}

  std::string Describe() const override {
    return absl::StrCat("StageGroup on ", o_.device == Device::Kind::kCUDA ? "cuda" : "cpu", ", TP ", o_.tp,
                        ", attention DP ", o_.attn_dp, ", eager steps");
  }

  absl::StatusOr<InProcessFigures> Measure(int batch) override {
    for (int w = 0; w < o_.warmup; ++w) SEAM_RETURN_IF_ERROR(Round(batch, w + 1).status());
    return Round(batch, 0);
  }

 private:
  absl::StatusOr<std::vector<int32_t>> StepGreedy(const std::vector<SequenceStep>& steps) {
    SEAM_ASSIGN_OR_RETURN(std::vector<Tensor> logits, group_->Step(steps, false));
    std::vector<int32_t> next;
    for (const Tensor& l : logits) {
      const float* row = l.data<float>();
      next.push_back(static_cast<int32_t>(std::max_element(row, row + l.numel()) - row));
    }
    return next;
  }

  absl::StatusOr<InProcessFigures> Round(int batch, uint64_t round) {
    const int64_t vocab = group_->config().vocab_size;
    std::vector<SequenceStep> steps = Prompts(batch, next_id_, round, o_, vocab);
    next_id_ += batch;
    InProcessFigures f;
    const Clock::time_point t0 = Clock::now();
    SEAM_ASSIGN_OR_RETURN(std::vector<int32_t> next, StepGreedy(steps));
    f.prefill_ms = MsSince(t0);
    const Clock::time_point t1 = Clock::now();
    for (int k = 1; k < o_.new_tokens; ++k) {
      Advance(steps, next);
      SEAM_ASSIGN_OR_RETURN(next, StepGreedy(steps));
    }
    const double decode_ms = MsSince(t1);
    for (const SequenceStep& s : steps) SEAM_RETURN_IF_ERROR(group_->Free(s.sequence));
    f.ms_per_step = decode_ms / (o_.new_tokens - 1);
    f.tokens_per_s = 1e3 * batch * o_.new_tokens / (f.prefill_ms + decode_ms);
    return f;
  }

  std::unique_ptr<runtime::StageGroup> group_;
  InProcessOptions o_;
  uint64_t next_id_ = 1;
};

// One whole-stack model on GPU 0: eager prefill, then decode steps replayed
// from a CUDA graph per batch size (as seam-bench-gpu decode runs them).
class GraphDecode : public InProcessDecode {
 public:
  static absl::StatusOr<std::unique_ptr<InProcessDecode>> Load(const InProcessOptions& o) {
    auto d = std::unique_ptr<GraphDecode>(new GraphDecode(o));
    SEAM_RETURN_IF_ERROR(UseDevice(kGpu));
    SEAM_ASSIGN_OR_RETURN(d->checkpoint_, weights::Checkpoint::Open(o.model_dir));
    SEAM_ASSIGN_OR_RETURN(boundary::Topology topology, boundary::Topology::Make(1, 1, 0));
    models::ModelOptions options{topology, boundary::ReductionPolicy::kAr, o.dtype};
    options.device = kGpu;
    SEAM_ASSIGN_OR_RETURN(d->model_, models::LoadDecoderModel(*d->checkpoint_, options));
    models::KvCacheOptions cache;
    cache.budget_bytes = CacheBudget(d->model_->config(), o);
    cache.dtype = o.dtype;
    cache.device = kGpu;
    SEAM_ASSIGN_OR_RETURN(d->cache_, d->model_->MakeCache(cache));
    return std::unique_ptr<InProcessDecode>(std::move(d));
  }

  std::string Describe() const override {
    if (model_->graph_max_rows() < 1) {
      return "eager decode on GPU 0, TP 1 (the model records no CUDA graph: its MoE layers run their experts one by one)";
    }
    return "CUDA-graph decode (runtime::DecodeGraph) on GPU 0, TP 1 (eager above " +
           std::to_string(model_->graph_max_rows()) + " rows)";
  }

  absl::StatusOr<InProcessFigures> Measure(int batch) override {
    // A batch the model cannot record (above graph_max_rows) decodes eagerly.
    if (graphs_.count(batch) == 0 && batch <= model_->graph_max_rows()) {
      SEAM_ASSIGN_OR_RETURN(graphs_[batch], runtime::DecodeGraph::Capture(*model_, *cache_, batch,
                                                                          o_.prompt_len + o_.new_tokens + 1));
    }
    for (int w = 0; w < o_.warmup; ++w) SEAM_RETURN_IF_ERROR(Round(batch, w + 1).status());
    return Round(batch, 0);
  }

 private:
  static inline const Device kGpu = Device::CUDA(0);
  explicit GraphDecode(const InProcessOptions& o) : o_(o) {}

  static absl::StatusOr<std::vector<int32_t>> ArgmaxToHost(const Tensor& logits) {
    SEAM_ASSIGN_OR_RETURN(Tensor ids, Tensor::TryEmpty({logits.rows()}, DType::kI32, logits.device()));
    SEAM_RETURN_IF_ERROR(kernels::Argmax(logits, ids));
    SEAM_ASSIGN_OR_RETURN(Tensor host, ids.To(Device::CPU()));
    return std::vector<int32_t>(host.data<int32_t>(), host.data<int32_t>() + host.numel());
  }

  absl::StatusOr<InProcessFigures> Round(int batch, uint64_t round) {
    std::vector<SequenceStep> steps = Prompts(batch, next_id_, round, o_, model_->config().vocab_size);
    next_id_ += batch;
    InProcessFigures f;
    const Clock::time_point t0 = Clock::now();
    boundary::ForwardBatch prefill(0, boundary::BatchVariant::kOrdinary, model_->options().topology,
                                   {static_cast<int64_t>(batch) * o_.prompt_len});
    SEAM_ASSIGN_OR_RETURN(Tensor logits, model_->Forward(prefill, models::StepInput{steps, false}, *cache_));
    SEAM_ASSIGN_OR_RETURN(std::vector<int32_t> next, ArgmaxToHost(logits));
    f.prefill_ms = MsSince(t0);
    const auto graph = graphs_.find(batch);
    const Clock::time_point t1 = Clock::now();
    if (graph != graphs_.end()) {
      kernels::ScopedStream on(graph->second->stream().handle());
      for (int k = 1; k < o_.new_tokens; ++k) {
        Advance(steps, next);
        SEAM_ASSIGN_OR_RETURN(Tensor step_logits, graph->second->Step(models::StepInput{steps, false}));
        SEAM_ASSIGN_OR_RETURN(next, ArgmaxToHost(step_logits));
      }
    } else {
      for (int k = 1; k < o_.new_tokens; ++k) {
        Advance(steps, next);
        boundary::ForwardBatch decode(0, boundary::BatchVariant::kOrdinary, model_->options().topology,
                                      {static_cast<int64_t>(batch)});
        SEAM_ASSIGN_OR_RETURN(Tensor step_logits, model_->Forward(decode, models::StepInput{steps, false}, *cache_));
        SEAM_ASSIGN_OR_RETURN(next, ArgmaxToHost(step_logits));
      }
    }
    const double decode_ms = MsSince(t1);
    for (const SequenceStep& s : steps) SEAM_RETURN_IF_ERROR(cache_->Free(s.sequence));
    f.ms_per_step = decode_ms / (o_.new_tokens - 1);
    f.tokens_per_s = 1e3 * batch * o_.new_tokens / (f.prefill_ms + decode_ms);
    return f;
  }

  InProcessOptions o_;
  std::unique_ptr<weights::Checkpoint> checkpoint_;
  std::unique_ptr<models::DecoderModel> model_;
  std::unique_ptr<models::KvCache> cache_;
  std::map<int, std::unique_ptr<runtime::DecodeGraph>> graphs_;
  uint64_t next_id_ = 1;
};

}  // namespace

absl::StatusOr<std::unique_ptr<InProcessDecode>> InProcessDecode::Create(const InProcessOptions& o) {
  if (o.new_tokens < 2) return absl::InvalidArgumentError("the in-process decode needs new_tokens >= 2");
  const bool cuda = o.device == Device::Kind::kCUDA;
  if (cuda && !CudaAvailable()) {
    return absl::FailedPreconditionError("this process has no CUDA path or sees no GPU");
  }
  if (cuda && o.tp == 1) return GraphDecode::Load(o);
  SEAM_ASSIGN_OR_RETURN(weights::ModelConfig config, weights::LoadModelConfig(o.model_dir));
  runtime::StageGroupOptions options;
  options.device = o.device;
  options.model.dtype = options.cache.dtype = o.dtype;
  options.cache.budget_bytes = CacheBudget(config, o);
  // A round's prefill of the largest batch is one step.
  options.kv.max_step_tokens = std::max<int64_t>(options.kv.max_step_tokens, int64_t{o.max_batch} * o.prompt_len);
  // As seam-stage's default: the fused all-reduce where it measures no slower.
  options.allreduce_fusion.mode = boundary::AllReduceFusionMode::kAuto;
  SEAM_ASSIGN_OR_RETURN(std::unique_ptr<runtime::StageGroup> group,
                        runtime::StageGroup::Create(o.model_dir, o.tp, o.attn_dp, boundary::ReductionPolicy::kAuto,
                                                    options));
  return std::unique_ptr<InProcessDecode>(new GroupDecode(std::move(group), o));
}

}  // namespace seam::cli
