// A stage group's decode graphs, set up once when it starts: whether its
// piece takes graphs, their context limit, the handoff form a non-first
// piece's graphs take (from its producer's declaration), and the capture of
// every bucket on every rank. Steps only replay them (stage_group_run.cc).
#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "seam/core/device_memory.h"
#include "seam/core/logging.h"
#include "seam/core/status.h"
#include "seam/kernels/stream.h"
#include "seam/runtime/kv_sizing.h"
#include "src/stage_group_impl.h"

namespace seam::runtime {
namespace {

using internal::RankState;

// The buckets a piece recording at most `most` token rows per step can
// replay; logs what it drops. Sets `off` when none is left.
void KeepRecordableBuckets(const weights::ModelConfig& config, int attn_dp, int64_t most,
                           std::vector<int64_t>& buckets, std::string& off) {
  // A bucket's step carries up to bucket rows in each DP group; the model
  // bounds the rows a recorded step may carry (MoE layers group their
  // experts on the device up to a size).
  const size_t asked = buckets.size();
  buckets.erase(std::remove_if(buckets.begin(), buckets.end(), [&](int64_t b) { return b * attn_dp > most; }),
                buckets.end());
  if (buckets.empty()) {
    off = absl::StrCat(config.architecture, " decode steps of this piece are not recorded as CUDA graphs",
                       most == 0 ? ": its MoE layers run their experts one by one (the group offsets read on the host)"
                                 : absl::StrCat(" above ", most, " token rows"));
  } else if (buckets.size() < asked) {
    SEAM_LOG_INFO("decode graphs up to {} sequences per DP group: this piece records at most {} token rows "
                  "(its MoE layers group their experts on the device up to that)",
                  buckets.back(), most);
  }
}

// A non-first piece's graphs take the handoff in the form its producer's
// declaration names for an ordinary batch (the graphs' variant): that
// state, on attention-TP slices (boundary::ToPp exports slices). Slices hold
// a DP group's rows in order only at attention TP 1.
absl::StatusOr<std::optional<HandoffForm>> GraphInForm(const models::DecoderModel& model, int attn_tp,
                                                       std::string& off) {
  if (model.is_first_piece()) return std::optional<HandoffForm>();
  const boundary::StageBoundary* entry = model.entry_boundary();
  if (entry == nullptr || !entry->bound() || !entry->plan().producer.exists) {
    return absl::InternalError("a non-first piece without a bound entry stage");
  }
  const boundary::StagePlan& plan = entry->plan();
  const HandoffForm form{
      boundary::PipelineHandoffState(plan.producer.declaration, boundary::BatchVariant::kOrdinary, plan.policy),
      boundary::RowForm::kAttnTpSlice};
  if (attn_tp > 1) {
    off = absl::StrCat("this piece takes its handoff on attention-TP slices of ", attn_tp,
                       " ranks; decode graphs take a DP group's rows in order");
  }
  return std::optional<HandoffForm>(form);
}

// What rank `rank` captures a graph with: a decode graph of `sequences`
// (rows 0) or a mixed one of `rows` (sharing the rank's logits buffer).
DecodeGraphOptions GraphOptions(RankState& rank, int64_t sequences, int64_t rows,
                                const std::optional<HandoffForm>& form, int64_t max_context, absl::Duration timeout) {
  DecodeGraphOptions o;
  o.batch_size = sequences;
  o.rows = rows;
  if (rows > 0) o.logits_buffer = rank.mixed_logits;
  o.max_context = max_context;
  o.groups = rank.groups.get();
  o.stream = &rank.stream;
  o.comm_timeout = timeout;
  if (form.has_value()) {
    o.in_state = form->state;
    o.in_rows = form->rows;
  }
  return o;
}

}  // namespace

absl::Status StageGroup::Impl::SetUpGraphs(const weights::ModelConfig& config) {
  GraphDecodeStats& st = graph_stats;
  if (options.device != Device::Kind::kCUDA) {
    st.off_reason = "the group computes on the host";
  } else if (options.graph_buckets.empty()) {
    st.off_reason = "no graph buckets were asked for";
  } else {
    KeepRecordableBuckets(config, attn_dp, ranks[0]->model->graph_max_rows(), options.graph_buckets, st.off_reason);
  }
  const int64_t cache_tokens = kv_blocks * options.cache.block_size;
  graph_max_context = std::min({options.graph_max_context, config.max_position_embeddings, cache_tokens});
  if (st.off_reason.empty() && graph_max_context <= 0) st.off_reason = "the graphs' context limit is not positive";
  if (st.off_reason.empty()) {
    SEAM_ASSIGN_OR_RETURN(graph_in_form, GraphInForm(*ranks[0]->model, attn_tp(), st.off_reason));
  }
  if (!st.off_reason.empty()) {
    if (options.device == Device::Kind::kCUDA) {
      SEAM_LOG_INFO("decode steps of this piece run eagerly, without CUDA graphs: {}", st.off_reason);
    }
    st.mixed_off_reason = "decode graphs are off";
    return absl::OkStatus();
  }
  SEAM_RETURN_IF_ERROR(CaptureGraphs(options.graph_buckets));
  if (!st.off_reason.empty()) {
    st.mixed_off_reason = "decode graphs are off";
    return absl::OkStatus();
  }
  ChooseMixedGraphs(config);
  if (!st.mixed_off_reason.empty()) {
    SEAM_LOG_INFO("steps holding prefill rows run eagerly, without CUDA graphs: {}", st.mixed_off_reason);
    return absl::OkStatus();
  }
  return CaptureGraphs(st.mixed_captured, /*mixed=*/true);
}

void StageGroup::Impl::ChooseMixedGraphs(const weights::ModelConfig& config) {
  GraphDecodeStats& st = graph_stats;
  const models::KvCache& cache = *ranks[0]->cache;
  if (options.mixed_graph_rows.empty()) {
    st.mixed_off_reason = "no mixed graph rows were asked for";
  } else if (cache.states() != nullptr || cache.is_latent()) {
    st.mixed_off_reason = absl::StrCat(config.architecture, cache.is_latent() ? " keeps a latent cache" : " keeps Mamba state",
                                       ", whose kernels take no empty sequence");
  }
  if (!st.mixed_off_reason.empty()) return;
  // Every rank's free memory: a mixed graph's activations come from the
  // graphs' own pool, beside what the eager steps' pool keeps.
  auto free = std::make_shared<std::vector<int64_t>>(ranks.size(), 0);
  Impl* self = this;
  const absl::Status queried = RunOnAll([self, free](int r) -> absl::Status {
    SEAM_RETURN_IF_ERROR(UseDevice(self->RankDevice(r)));
    SEAM_ASSIGN_OR_RETURN(const DeviceMemoryInfo info, QueryDeviceMemory(self->RankDevice(r)));
    (*free)[r] = info.free_bytes;
    return absl::OkStatus();
  });
  const int64_t least = queried.ok() ? *std::min_element(free->begin(), free->end()) : 0;
  const int64_t per_group =
      options.kv.max_step_tokens > 0 ? options.kv.max_step_tokens / attn_dp : models::DecoderModel::kUnboundedGraphRows;
  const int64_t recordable = ranks[0]->model->graph_max_rows() / attn_dp;
  const int64_t largest = st.captured.back();
  std::vector<int64_t> dropped;
  for (int64_t rows : options.mixed_graph_rows) {
    const int64_t reserve = ActivationReserveBytes(config, tp, attn_tp(), options.model.dtype, rows * attn_dp);
    if (rows < 2 || rows > per_group || rows > recordable || 2 * reserve > least) {
      dropped.push_back(rows);
      continue;
    }
    st.mixed_captured.push_back(rows);
    mixed_sequences.push_back(std::min(rows - 1, largest + kMixedGraphExtraSequences));
  }
  if (!dropped.empty()) {
    SEAM_LOG_INFO("no mixed graphs of [{}] rows per DP group: past this stage's {} step rows per DP group, what "
                  "its model records ({}), or what {} of free GPU memory holds twice",
                  absl::StrJoin(dropped, ", "), per_group, recordable, FormatBytes(least));
  }
  if (st.mixed_captured.empty()) st.mixed_off_reason = "no mixed graph rows fit this stage";
}

absl::Status StageGroup::Impl::CaptureGraphs(const std::vector<int64_t>& buckets, bool mixed) {
  const std::optional<HandoffForm> form = graph_in_form;
  const int64_t max_context = graph_max_context;
  const absl::Duration timeout = options.comm_timeout;
  const std::vector<int64_t> sequences = mixed ? mixed_sequences : buckets;
  const int64_t vocab = checkpoint->config().vocab_size;
  auto memory = std::make_shared<std::pair<int64_t, int64_t>>(0, 0);  // rank 0: buffer bytes, lost free bytes
  auto unsupported = std::make_shared<std::string>();                  // rank 0: why this piece cannot
  Impl* self = this;
  const absl::Time start = absl::Now();
  const absl::Status captured = RunOnAll([self, buckets, sequences, mixed, vocab, form, max_context, timeout,
                                          memory, unsupported](int r) -> absl::Status {
    RankState& rank = *self->ranks[r];
    const Device device = self->RankDevice(r);
    SEAM_RETURN_IF_ERROR(UseDevice(device));
    SEAM_ASSIGN_OR_RETURN(const DeviceMemoryInfo before, QueryDeviceMemory(device));
    std::map<int64_t, std::unique_ptr<DecodeGraph>>& graphs = mixed ? rank.mixed_graphs : rank.graphs;
    if (mixed && rank.model->is_last_piece() && !rank.mixed_logits.defined()) {
      kernels::ScopedStream on(rank.stream.handle());
      SEAM_ASSIGN_OR_RETURN(rank.mixed_logits,
                            Tensor::TryEmpty({*std::max_element(sequences.begin(), sequences.end()), vocab},
                                             DType::kF32, device));
      if (r == 0) memory->first += rank.mixed_logits.nbytes();
    }
    for (size_t i = 0; i < buckets.size(); ++i) {
      const int64_t b = buckets[i];
      if (graphs.count(b) != 0) continue;
      const DecodeGraphOptions o = GraphOptions(rank, sequences[i], mixed ? b : 0, form, max_context, timeout);
      absl::StatusOr<std::unique_ptr<DecodeGraph>> graph = DecodeGraph::Capture(*rank.model, *rank.cache, o);
      if (absl::IsUnimplemented(graph.status())) {  // a fact of the piece, alike on every rank: no graphs
        if (r == 0) *unsupported = std::string(graph.status().message());
        graphs.clear();
        return rank.groups->Synchronize(absl::Now() + timeout);  // the warm-up's collectives
      }
      if (!graph.ok()) {
        return Annotate(graph.status(), mixed ? absl::StrCat("capturing the mixed graph of ", b, " rows")
                                              : absl::StrCat("capturing the decode graph of bucket ", b));
      }
      graphs[b] = std::move(*graph);
      if (r == 0) memory->first += graphs[b]->buffer_bytes();
    }
    SEAM_ASSIGN_OR_RETURN(const DeviceMemoryInfo after, QueryDeviceMemory(device));
    if (r == 0) memory->second = before.free_bytes - after.free_bytes;
    return absl::OkStatus();
  });
  if (!captured.ok()) {
    // A rank may have stopped between collectives: the group cannot go on.
    broken = captured;
    return captured;
  }
  if (!unsupported->empty()) {
    SEAM_LOG_INFO("{} of this piece run eagerly, without CUDA graphs: {}",
                  mixed ? "steps holding prefill rows" : "decode steps", *unsupported);
    if (mixed) {
      graph_stats.mixed_off_reason = *unsupported;
      graph_stats.mixed_captured.clear();
      mixed_sequences.clear();
      return absl::OkStatus();
    }
    graph_stats.off_reason = *unsupported;
    graph_stats.captured.clear();
    return absl::OkStatus();
  }
  if (!mixed) {
    std::set<int64_t> all(graph_stats.captured.begin(), graph_stats.captured.end());
    all.insert(buckets.begin(), buckets.end());
    graph_stats.captured.assign(all.begin(), all.end());
  }
  graph_stats.buffer_bytes += memory->first;
  graph_stats.captured_bytes += memory->second;
  SEAM_LOG_INFO("CUDA graphs captured for {} [{}] ({} per attention-DP group, contexts up to {} tokens) in {} ms: "
                "{:.1f} MiB of fixed buffers, {:.1f} MiB of GPU memory on rank 0",
                mixed ? "mixed steps of" : "decode buckets", absl::StrJoin(buckets, ", "),
                mixed ? absl::StrCat("token rows of up to [", absl::StrJoin(sequences, ", "), "] sequences")
                      : "sequences",
                max_context, absl::ToInt64Milliseconds(absl::Now() - start), memory->first / 1048576.0,
                memory->second / 1048576.0);
  return absl::OkStatus();
}

StepPlanFacts StageGroup::Impl::PlanFacts() const {
  StepPlanFacts f;
  f.tp = tp;
  f.attn_dp = attn_dp;
  f.attn_cp = options.attn_cp;
  f.first_piece = options.model.first_layer == 0;
  f.last_piece = options.model.end_layer == checkpoint->config().num_hidden_layers;
  f.hidden_size = checkpoint->config().hidden_size;
  f.max_step_tokens = options.kv.max_step_tokens;
  f.variants = options.variants;
  f.graph_buckets = graph_stats.captured;
  f.graph_max_context = graph_max_context;
  f.graph_in_form = graph_in_form;
  f.graph_off_reason = graph_stats.off_reason;
  f.mixed_graph_rows = graph_stats.mixed_captured;
  f.mixed_graph_sequences = mixed_sequences;
  return f;
}

StepPlanState StageGroup::Impl::PlanState() const {
  StepPlanState s;
  s.dp_of = &dp_of;
  for (int dp = 0; dp < attn_dp; ++dp) s.caches.push_back(ranks[dp * attn_tp()]->cache.get());
  s.group_step = version;
  return s;
}

}  // namespace seam::runtime
