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
    return absl::OkStatus();
  }
  return CaptureGraphs(options.graph_buckets);
}

absl::Status StageGroup::Impl::CaptureGraphs(const std::vector<int64_t>& buckets) {
  const std::optional<HandoffForm> form = graph_in_form;
  const int64_t max_context = graph_max_context;
  const absl::Duration timeout = options.comm_timeout;
  auto memory = std::make_shared<std::pair<int64_t, int64_t>>(0, 0);  // rank 0: buffer bytes, lost free bytes
  auto unsupported = std::make_shared<std::string>();                  // rank 0: why this piece cannot
  Impl* self = this;
  const absl::Time start = absl::Now();
  const absl::Status captured =
      RunOnAll([self, buckets, form, max_context, timeout, memory, unsupported](int r) -> absl::Status {
    RankState& rank = *self->ranks[r];
    const Device device = self->RankDevice(r);
    SEAM_RETURN_IF_ERROR(UseDevice(device));
    SEAM_ASSIGN_OR_RETURN(const DeviceMemoryInfo before, QueryDeviceMemory(device));
    for (int64_t b : buckets) {
      if (rank.graphs.count(b) != 0) continue;
      DecodeGraphOptions o;
      o.batch_size = b;
      o.max_context = max_context;
      o.groups = rank.groups.get();
      o.stream = &rank.stream;
      o.comm_timeout = timeout;
      if (form.has_value()) {
        o.in_state = form->state;
        o.in_rows = form->rows;
      }
      absl::StatusOr<std::unique_ptr<DecodeGraph>> graph = DecodeGraph::Capture(*rank.model, *rank.cache, o);
      if (absl::IsUnimplemented(graph.status())) {  // a fact of the piece, alike on every rank: no graphs
        if (r == 0) *unsupported = std::string(graph.status().message());
        rank.graphs.clear();
        return rank.groups->Synchronize(absl::Now() + timeout);  // the warm-up's collectives
      }
      if (!graph.ok()) return Annotate(graph.status(), absl::StrCat("capturing the decode graph of bucket ", b));
      rank.graphs[b] = std::move(*graph);
      if (r == 0) memory->first += rank.graphs[b]->buffer_bytes();
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
    graph_stats.off_reason = *unsupported;
    graph_stats.captured.clear();
    SEAM_LOG_INFO("decode steps of this piece run eagerly, without CUDA graphs: {}", *unsupported);
    return absl::OkStatus();
  }
  std::set<int64_t> all(graph_stats.captured.begin(), graph_stats.captured.end());
  all.insert(buckets.begin(), buckets.end());
  graph_stats.captured.assign(all.begin(), all.end());
  graph_stats.buffer_bytes += memory->first;
  graph_stats.captured_bytes += memory->second;
  SEAM_LOG_INFO("CUDA graphs captured for decode buckets [{}] (sequences per attention-DP group, contexts up to {} "
                "tokens) in {} ms: {:.1f} MiB of fixed buffers, {:.1f} MiB of GPU memory on rank 0",
                absl::StrJoin(buckets, ", "), max_context, absl::ToInt64Milliseconds(absl::Now() - start),
                memory->first / 1048576.0, memory->second / 1048576.0);
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
