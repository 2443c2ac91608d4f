// StageGroup: rank threads over real Gloo, each with its model shards and KV
// cache; sequence placement on attention-DP groups; one step = one forward
// on every rank, with every wait bounded by a deadline.
#include "seam/runtime/stage_group.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <tuple>

#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "seam/boundary/forward_batch.h"
#include "seam/comm/nccl_communicator.h"
#include "seam/comm/process_groups.h"
#include "seam/comm/store.h"
#include "seam/core/cuda_graph.h"
#include "seam/core/device_memory.h"
#include "seam/core/logging.h"
#include "seam/core/status.h"
#include "seam/runtime/decode_graph.h"
#include "seam/kernels/cpu_threads.h"
#include "seam/weights/checkpoint.h"
#include "src/batch_variant_log.h"
#include "src/piece_handoff.h"
#include "src/rank_worker.h"
#include "src/stage_group_impl.h"

namespace seam::runtime {
namespace {

using internal::Leaving;
using internal::Placed;
using internal::RankState;

// The status payload naming the TP rank whose error a step reports.
constexpr char kTpRankPayload[] = "type.seam.dev/tp_rank";

absl::StatusOr<std::string> MakeStoreDir() {
  std::string pattern = (std::filesystem::temp_directory_path() / "seam_stage_group_XXXXXX").string();
  if (mkdtemp(pattern.data()) == nullptr) {
    return absl::InternalError(absl::StrCat("cannot create a temporary directory from ", pattern));
  }
  return pattern;
}

// DEADLINE_EXCEEDED and broken-communicator errors usually echo another rank's
// failure; report the first rank whose error is of another kind when there is one.
bool IsEcho(const absl::Status& s) {
  return absl::IsDeadlineExceeded(s) || absl::IsUnavailable(s) || absl::IsFailedPrecondition(s);
}

}  // namespace

void StageGroup::Impl::SetUpGraphs(const weights::ModelConfig& config) {
  GraphDecodeStats& st = graph_stats;
  if (options.device != Device::Kind::kCUDA) {
    st.off_reason = "the group computes on the host";
  } else if (options.graph_buckets.empty()) {
    st.off_reason = "no graph buckets were asked for";
  } else if (!ranks.empty()) {
    // A bucket's step carries up to bucket rows in each DP group; the
    // model bounds the rows a recorded step may carry (MoE layers group
    // their experts on the device up to a size).
    const int64_t most = ranks[0]->model->graph_max_rows();
    std::vector<int64_t>& buckets = options.graph_buckets;
    const size_t asked = buckets.size();
    buckets.erase(std::remove_if(buckets.begin(), buckets.end(), [&](int64_t b) { return b * attn_dp > most; }),
                  buckets.end());
    if (buckets.empty()) {
      st.off_reason = absl::StrCat(config.architecture, " decode steps of this piece are not recorded as CUDA graphs",
                                   most == 0 ? ": its MoE layers run their experts one by one (the group offsets "
                                               "read on the host)"
                                             : absl::StrCat(" above ", most, " token rows"));
      SEAM_LOG_INFO("decode steps of this piece run eagerly, without CUDA graphs: {}", st.off_reason);
    } else if (buckets.size() < asked) {
      SEAM_LOG_INFO("decode graphs up to {} sequences per DP group: this piece records at most {} token rows "
                    "(its MoE layers group their experts on the device up to that)",
                    buckets.back(), most);
    }
  }
  const int64_t cache_tokens = kv_blocks * options.cache.block_size;
  graph_max_context = std::min({options.graph_max_context, config.max_position_embeddings, cache_tokens});
  if (st.off_reason.empty() && graph_max_context <= 0) st.off_reason = "the graphs' context limit is not positive";
}

int64_t StageGroup::Impl::BucketFor(const std::vector<models::StepInput>& inputs, const std::vector<int64_t>& dp_rows,
                                    const std::vector<boundary::PipelineTensors>& in) const {
  if (!graph_stats.off_reason.empty()) return 0;
  for (const models::StepInput& input : inputs) {
    for (const models::SequenceStep& s : input.sequences) {
      if (s.tokens.size() != 1 || s.start + 1 > graph_max_context) return 0;  // prefill, or too long a context
    }
  }
  for (const boundary::PipelineTensors& t : in) {  // every rank's handoff in one form the graphs take
    if (t.state != in.front().state || t.rows != in.front().rows) return 0;
    if (graph_in_form.has_value() && std::pair{t.state, t.rows} != *graph_in_form) return 0;
    if (t.rows != boundary::RowForm::kDpRows && !(t.rows == boundary::RowForm::kAttnTpSlice && attn_tp() == 1)) {
      return 0;
    }
  }
  const int64_t most = *std::max_element(dp_rows.begin(), dp_rows.end());
  if (most == 0) return 0;
  for (int64_t b : options.graph_buckets) {
    if (b >= most) return b;
  }
  return 0;
}

absl::Status StageGroup::Impl::CaptureGraphs(const std::vector<int64_t>& buckets) {
  const std::optional<std::pair<boundary::StreamState, boundary::RowForm>> form = graph_in_form;
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
      if (form.has_value()) std::tie(o.in_state, o.in_rows) = *form;
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

absl::Status StageGroup::Impl::RunOnAll(const std::function<absl::Status(int)>& fn) {
  std::vector<std::shared_ptr<internal::TaskResult>> results;
  for (int r = 0; r < tp; ++r) results.push_back(workers[r]->Post([fn, r] { return fn(r); }));
  const absl::Time deadline = absl::Now() + options.rank_deadline;
  std::vector<absl::Status> statuses;
  for (int r = 0; r < tp; ++r) statuses.push_back(results[r]->Wait(deadline));
  int worst = -1;
  for (int r = 0; r < tp; ++r) {
    if (statuses[r].ok()) continue;
    if (worst < 0 || (IsEcho(statuses[worst]) && !IsEcho(statuses[r]))) worst = r;
  }
  if (worst < 0) return absl::OkStatus();
  absl::Status failed = Annotate(statuses[worst], RankName(worst));
  failed.SetPayload(kTpRankPayload, absl::Cord(absl::StrCat(worst)));
  return failed;
}

void StageGroup::Impl::AbortCollectives() {
  RunOnAll([this](int r) -> absl::Status {
    internal::RankState* rank = ranks[r].get();
    if (rank == nullptr || rank->groups == nullptr) return absl::OkStatus();
    SEAM_RETURN_IF_ERROR(UseDevice(RankDevice(r)));
    const comm::ProcessGroups& g = *rank->groups;
    std::vector<comm::Communicator*> seen;
    for (comm::Communicator* c : {&g.tp(), &g.attn_tp(), &g.attn_dp(), &g.attn_cp()}) {
      if (std::find(seen.begin(), seen.end(), c) != seen.end()) continue;
      seen.push_back(c);
      c->Synchronize(absl::Now()).IgnoreError();  // aborts a communicator whose stream is not done
    }
    return absl::OkStatus();
  }).IgnoreError();
}

std::optional<int> FailedTpRank(const absl::Status& status) {
  const auto payload = status.GetPayload(kTpRankPayload);
  int rank = 0;
  if (!payload.has_value() || !absl::SimpleAtoi(std::string(*payload), &rank)) return std::nullopt;
  return rank;
}

StageGroup::StageGroup(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
StageGroup::~StageGroup() = default;
const weights::ModelConfig& StageGroup::config() const { return impl_->checkpoint->config(); }
int StageGroup::tp() const { return impl_->tp; }
int StageGroup::attn_dp() const { return impl_->attn_dp; }
int StageGroup::first_layer() const { return impl_->options.first_layer; }
int StageGroup::end_layer() const { return impl_->options.end_layer; }
int StageGroup::attn_cp() const { return impl_->options.attn_cp; }

boundary::ReductionPolicy StageGroup::policy() const { return impl_->policy; }
bool StageGroup::on_gpu() const { return impl_->options.device == Device::Kind::kCUDA; }
int64_t StageGroup::KvBlocksPerDpGroup() const { return impl_->kv_blocks; }
int64_t StageGroup::KvBlockSize() const { return impl_->options.cache.block_size; }

int StageGroup::DpGroupOf(uint64_t sequence) const {
  auto it = impl_->dp_of.find(sequence);
  return it == impl_->dp_of.end() ? -1 : it->second;
}

std::string StageGroup::FusionReport() const {
  const RankState& r = *impl_->ranks[0];
  if (r.fusions == nullptr) return "";
  return absl::StrCat(r.fusion_report, "\nall-reduce fusion: ", r.fusions->runs(), " sums fused on rank 0 so far");
}

GraphDecodeStats StageGroup::GraphStats() const { return impl_->graph_stats; }

std::vector<double> StageGroup::LastSynchronizeSeconds() const {
  std::vector<double> seconds;
  for (const auto& rank : impl_->ranks) seconds.push_back(rank->synchronize_seconds);
  return seconds;
}

std::string GraphDecodeStats::ToString() const {
  if (!off_reason.empty()) return absl::StrCat("CUDA graph decode off: ", off_reason);
  std::vector<std::string> per_bucket;
  for (const auto& [bucket, count] : replays) per_bucket.push_back(absl::StrCat(bucket, ": ", count));
  return absl::StrCat("CUDA graph decode: buckets [", absl::StrJoin(captured, ", "), "] captured; replays {",
                      absl::StrJoin(per_bucket, ", "), "}; ", eager_steps, " eager steps");
}

int64_t StageGroup::FreeBlocks(int dp) const { return impl_->ranks[dp * impl_->attn_tp()]->cache->free_blocks(); }

absl::StatusOr<std::unique_ptr<StageGroup>> StageGroup::Create(const std::string& model_dir, int tp, int attn_dp,
                                                               boundary::ReductionPolicy policy,
                                                               const StageGroupOptions& options) {
  SEAM_ASSIGN_OR_RETURN(const boundary::Topology rank0, boundary::Topology::Make(tp, attn_dp, 0, options.attn_cp));
  SEAM_RETURN_IF_ERROR(boundary::ValidateVariantChoice(options.variants, rank0));
  // The tp rank threads share this process's math-library pool.
  kernels::ShareCpuMathThreads(tp);
  auto impl = std::make_unique<Impl>();
  impl->tp = tp;
  impl->attn_dp = attn_dp;
  impl->options = options;
  SEAM_ASSIGN_OR_RETURN(impl->checkpoint, weights::Checkpoint::Open(model_dir));
  if (options.end_layer < 0) impl->options.end_layer = static_cast<int>(impl->checkpoint->config().num_hidden_layers);
  const boundary::ReductionPolicy resolved =
      boundary::ResolveReductionPolicy(policy, impl->checkpoint->config().architecture);
  impl->policy = resolved;
  SEAM_ASSIGN_OR_RETURN(impl->store_dir, MakeStoreDir());
  SEAM_ASSIGN_OR_RETURN(std::shared_ptr<comm::Store> store, comm::MakeFileStore(impl->store_dir));
  const bool cuda = options.device == Device::Kind::kCUDA;
  if (cuda && (options.first_gpu < 0 || CudaDeviceCount() < options.first_gpu + tp)) {
    return absl::FailedPreconditionError(absl::StrCat("a CUDA stage group of TP ", tp, " from GPU ", options.first_gpu,
                                                      " needs GPUs up to ", options.first_gpu + tp - 1,
                                                      "; this process sees ", CudaDeviceCount()));
  }
  const comm::CommOptions comm_options{options.comm_timeout};
  const comm::CommunicatorFactory factory =
      cuda ? comm::MakeNcclGroupFactory(store, comm_options) : comm::MakeGlooGroupFactory(store, comm_options);

  for (int r = 0; r < tp; ++r) {
    impl->ranks.push_back(std::make_unique<RankState>());
    impl->workers.push_back(std::make_unique<internal::RankWorker>(r));
  }
  Impl* self = impl.get();
  // Each rank's KV budget, from what its weights leave of its memory (kv_sizing.h).
  auto budgets = std::make_shared<std::vector<int64_t>>(tp, 0);
  SEAM_RETURN_IF_ERROR(self->RunOnAll([self, factory, store, tp, attn_dp, resolved, budgets](int r) -> absl::Status {
    RankState& rank = *self->ranks[r];
    const Device device = self->RankDevice(r);
    SEAM_RETURN_IF_ERROR(UseDevice(device));
    DeviceMemoryInfo before;
    int64_t pool_before = 0;
    if (device.is_cuda()) {
      SEAM_ASSIGN_OR_RETURN(before, QueryDeviceMemory(device));
      SEAM_ASSIGN_OR_RETURN(pool_before, DevicePoolReservedBytes(device));
      // One stream per rank for its kernels, its memory and its collectives:
      // a CUDA graph captures one stream, and ranks sharing nothing wait on
      // nothing else.
      SEAM_ASSIGN_OR_RETURN(rank.stream, CudaStream::Create(device));
      SetCurrentCudaStream(rank.stream.handle());
    }
    SEAM_ASSIGN_OR_RETURN(rank.topology, boundary::Topology::Make(tp, attn_dp, r, self->options.attn_cp));
    SEAM_ASSIGN_OR_RETURN(rank.groups, comm::ProcessGroups::Create(comm::Topology{tp, attn_dp, 1, self->options.attn_cp}, r, factory));
    if (device.is_cuda()) {
      for (comm::Communicator* c : {&rank.groups->tp(), &rank.groups->attn_tp(), &rank.groups->attn_dp(), &rank.groups->attn_cp()}) {
        if (auto* nccl = dynamic_cast<comm::NcclCommunicator*>(c)) nccl->SetStream(rank.stream.handle());
      }
    }
    const StageGroupOptions& o = self->options;
    if (o.dtype == DType::kBF16) {
      SEAM_ASSIGN_OR_RETURN(rank.fusions, boundary::MakeIpcFusionProvider(*rank.groups, store, self->RankDevice(r),
                                                                     self->checkpoint->config().hidden_size,
                                                                     o.allreduce_fusion, &rank.fusion_report));
    }
    models::ModelOptions model_options{rank.topology, resolved, o.dtype, o.first_layer,
                                       o.end_layer, self->RankDevice(r), rank.fusions};
    model_options.defer_moe_finalize = o.defer_moe_finalize;
    model_options.moe_experts = o.moe_experts;
    model_options.mamba_scan = o.mamba_scan;
    SEAM_ASSIGN_OR_RETURN(rank.model, models::LoadDecoderModel(*self->checkpoint, model_options));
    DeviceMemoryInfo after;
    int64_t used = 0;
    if (device.is_cuda()) {
      SEAM_RETURN_IF_ERROR(SynchronizeStream(device));
      SEAM_ASSIGN_OR_RETURN(after, QueryDeviceMemory(device));
      SEAM_ASSIGN_OR_RETURN(const int64_t pool_after, DevicePoolReservedBytes(device));
      used = LoadedBytes(before.free_bytes - after.free_bytes, pool_after - pool_before);
    }
    const weights::ModelConfig& config = self->checkpoint->config();
    const int64_t reserve = ActivationReserveBytes(config, tp, rank.topology.attn_tp(), o.dtype, o.kv.max_step_tokens);
    SEAM_ASSIGN_OR_RETURN((*budgets)[r],
                          KvBudgetBytes(o.kv, device, used, after.total_bytes, after.free_bytes, reserve));
    return absl::OkStatus();
  }));
  // Every rank takes the least budget, so every DP group holds as many blocks.
  models::KvCacheOptions cache = self->options.cache;
  cache.budget_bytes = *std::min_element(budgets->begin(), budgets->end());
  SEAM_RETURN_IF_ERROR(self->RunOnAll([self, cache](int r) -> absl::Status {
    SEAM_RETURN_IF_ERROR(UseDevice(self->RankDevice(r)));
    RankState& rank = *self->ranks[r];
    models::KvCacheOptions mine = cache;
    mine.report_progress = r == 0;  // one rank shows it; the others allocate alike
    SEAM_ASSIGN_OR_RETURN(rank.cache, rank.model->MakeCache(mine));
    return absl::OkStatus();
  }));
  self->kv_blocks = self->ranks[0]->cache->num_blocks();
  self->SetUpGraphs(self->checkpoint->config());
  // A first piece knows all it needs now; a later one learns its handoff's form at its first decode step.
  if (self->graph_stats.off_reason.empty() && self->options.graph_capture_at_start && self->options.first_layer == 0) {
    SEAM_RETURN_IF_ERROR(self->CaptureGraphs(self->options.graph_buckets));
  }
  return std::unique_ptr<StageGroup>(new StageGroup(std::move(impl)));
}

absl::StatusOr<std::vector<Tensor>> StageGroup::Step(const std::vector<models::SequenceStep>& sequences, bool all_logits) {
  if (!is_first_piece() || !is_last_piece()) {
    return absl::FailedPreconditionError(absl::StrCat("Step runs the whole model; this group holds layers [",
                                                      first_layer(), ", ", end_layer(), "): use StepPiece"));
  }
  SEAM_ASSIGN_OR_RETURN(PieceOutput out, StepPiece(sequences, all_logits, {}));
  return std::move(out.logits);
}

absl::StatusOr<PieceOutput> StageGroup::StepPiece(const std::vector<models::SequenceStep>& sequences, bool all_logits,
                                                  const std::vector<boundary::PipelineTensors>& in,
                                                  const std::vector<TokenChoice>* choices) {
  Impl& g = *impl_;
  if (!g.broken.ok()) {
    return absl::FailedPreconditionError(absl::StrCat("the stage group failed earlier: ", g.broken.ToString()));
  }
  const bool first = is_first_piece(), last = is_last_piece();
  if (choices != nullptr && (!last || all_logits || choices->size() != sequences.size())) {
    return absl::InvalidArgumentError(absl::StrCat("token choices are for the last piece without all_logits, one "
                                                   "per sequence: ", choices->size(), " for ", sequences.size(),
                                                   " sequences", last ? "" : " on a piece that is not the last"));
  }
  if (in.size() != (first ? 0u : static_cast<size_t>(g.tp))) {
    return absl::InvalidArgumentError(absl::StrCat("this piece (layers [", first_layer(), ", ", end_layer(),
                                                   ")) takes ", first ? 0 : g.tp, " handoffs, got ", in.size()));
  }
  // Place the step's sequences; new ones go round-robin and are kept only if the step runs.
  std::set<uint64_t> seen;
  std::map<uint64_t, int> placed;
  int next_dp = g.next_dp;
  std::vector<models::StepInput> inputs(g.attn_dp);
  std::vector<std::pair<int, int64_t>> where;  // per input sequence: DP group, first logits row there
  std::vector<int64_t> dp_rows(g.attn_dp, 0), dp_logit_rows(g.attn_dp, 0);
  std::vector<std::vector<TokenChoice>> choices_by_dp(g.attn_dp);  // in each DP group's row order
  for (const models::SequenceStep& s : sequences) {
    if (!seen.insert(s.sequence).second) {
      return absl::InvalidArgumentError(absl::StrCat("sequence ", s.sequence, " appears twice in one step"));
    }
    if (s.tokens.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("sequence ", s.sequence, " has no tokens in this step"));
    }
    if (s.dp_group >= g.attn_dp) {
      return absl::InvalidArgumentError(absl::StrCat("sequence ", s.sequence, ": DP group ", s.dp_group,
                                                     " of a group with attention DP ", g.attn_dp));
    }
    int dp = DpGroupOf(s.sequence);
    if (dp >= 0 && s.dp_group >= 0 && s.dp_group != dp) {
      return absl::InvalidArgumentError(absl::StrCat("sequence ", s.sequence, " lives on DP group ", dp,
                                                     "; the step names DP group ", s.dp_group));
    }
    if (dp < 0) {
      if (s.dp_group >= 0) {
        dp = s.dp_group;
      } else {
        dp = next_dp;
        next_dp = (next_dp + 1) % g.attn_dp;
      }
      placed[s.sequence] = dp;
    }
    inputs[dp].sequences.push_back(s);
    if (choices != nullptr) choices_by_dp[dp].push_back((*choices)[&s - sequences.data()]);
    inputs[dp].all_logits = all_logits;
    where.emplace_back(dp, dp_logit_rows[dp]);
    dp_rows[dp] += static_cast<int64_t>(s.tokens.size());
    dp_logit_rows[dp] += all_logits ? static_cast<int64_t>(s.tokens.size()) : 1;
  }
  for (int dp = 0; dp < g.attn_dp; ++dp) {  // refuse before any rank starts a collective
    std::vector<models::CacheSpan> spans;
    for (const models::SequenceStep& s : inputs[dp].sequences) {
      spans.push_back(models::CacheSpan{s.sequence, s.start, static_cast<int64_t>(s.tokens.size())});
    }
    const models::KvCache& cache = *g.ranks[dp * g.attn_tp()]->cache;
    const int64_t needed = cache.BlocksNeeded(spans);
    if (needed > cache.free_blocks()) {
      return absl::ResourceExhaustedError(absl::StrCat("KV cache full on DP group ", dp, ": the step needs ", needed,
                                                       " more blocks, ", cache.free_blocks(), " of ",
                                                       cache.num_blocks(), " are free"));
    }
    if (cache.StatesNeeded(spans) > 0 && cache.StatesNeeded(spans) > cache.states()->free_slots()) {
      return absl::ResourceExhaustedError(absl::StrCat("Mamba state full on DP group ", dp, ": the step needs ",
                                                       cache.StatesNeeded(spans), " more sequence slots, ",
                                                       cache.states()->free_slots(), " are free"));
    }
  }

  for (size_t r = 0; r < in.size(); ++r) {  // refuse a handoff that does not fit before any collective
    const boundary::BatchRows rows(g.ranks[r]->topology, dp_rows, /*padded=*/true);
    SEAM_RETURN_IF_ERROR(
        Annotate(boundary::CheckPipelineTensors(in[r], rows, config().hidden_size), g.RankName(r)));
  }

  int64_t bucket = g.BucketFor(inputs, dp_rows, in);
  if (bucket > 0 && !first && !g.graph_in_form.has_value()) {
    g.graph_in_form = std::pair{in.front().state, in.front().rows};
  }
  if (bucket > 0 && g.ranks[0]->graphs.count(bucket) == 0) {
    SEAM_RETURN_IF_ERROR(g.CaptureGraphs(g.options.graph_capture_at_start ? g.options.graph_buckets
                                                                          : std::vector<int64_t>{bucket}));
    if (!g.graph_stats.off_reason.empty()) bucket = 0;  // the piece turned out not to take graphs
  }
  const uint64_t microbatch = g.next_microbatch++;
  // Graph replays run as they were captured: ordinary rows.
  const boundary::BatchVariant variant = bucket > 0 ? boundary::BatchVariant::kOrdinary
                                                    : boundary::ChooseBatchVariant(g.options.variants, g.ranks[0]->topology,
                                                                                   dp_rows, IsPrefill(sequences));
  g.variant_log.Note(microbatch, variant, g.options.variants, dp_rows, bucket > 0);
  Impl* self = &g;
  const bool choose = choices != nullptr;
  const absl::Status run = g.RunOnAll([self, inputs, dp_rows, microbatch, in, bucket, choose, variant,
                                       choices_by_dp](int r) -> absl::Status {
    RankState& rank = *self->ranks[r];
    const Device device = self->RankDevice(r);
    SEAM_RETURN_IF_ERROR(UseDevice(device));
    // The last piece's output: the chosen tokens where the logits are, or the logits on the host.
    auto leave = [&](const Tensor& logits) -> absl::Status {
      rank.logits = Tensor();
      rank.tokens.clear();
      if (!logits.defined()) return absl::OkStatus();
      if (!choose) {
        SEAM_ASSIGN_OR_RETURN(rank.logits, logits.To(Device::CPU()));
        return absl::OkStatus();
      }
      const std::vector<TokenChoice>& mine = choices_by_dp[rank.topology.dp_rank()];
      if (mine.empty()) return absl::OkStatus();
      SEAM_ASSIGN_OR_RETURN(rank.tokens, ChooseTokens(logits.Rows(0, static_cast<int64_t>(mine.size())), mine));
      return absl::OkStatus();
    };
    if (bucket > 0) {
      SEAM_ASSIGN_OR_RETURN(DecodeGraphOutput o, rank.graphs.at(bucket)->Replay(inputs[rank.topology.dp_rank()],
                                                                                in.empty() ? nullptr : &in[r]));
      // After the replay, never inside a capture: the one wait of the step.
      const absl::Time wait = absl::Now();
      SEAM_RETURN_IF_ERROR(rank.groups->Synchronize(wait + self->options.comm_timeout));
      rank.synchronize_seconds = absl::ToDoubleSeconds(absl::Now() - wait);
      SEAM_ASSIGN_OR_RETURN(rank.handoff, Leaving(o.handoff, device, self->options.handoff_on_device));
      return leave(o.logits);
    }
    boundary::ForwardBatch batch(microbatch, variant, rank.topology, dp_rows);
    batch.comms = boundary::StageComms{&rank.groups->tp(), &rank.groups->attn_tp(), &rank.groups->attn_dp(), &rank.groups->attn_cp()};
    rank.handoff = boundary::PipelineTensors{};
    boundary::PipelineTensors entering;
    if (!in.empty()) {
      SEAM_ASSIGN_OR_RETURN(entering, Placed(in[r], device));
    }
    SEAM_ASSIGN_OR_RETURN(Tensor logits, rank.model->ForwardPiece(batch, inputs[rank.topology.dp_rank()], *rank.cache,
                                                                  in.empty() ? nullptr : &entering, &rank.handoff));
    // Collectives are stream-ordered: the step waits for them once, bounded
    // (a missed deadline aborts the communicator), before anything is read.
    const absl::Time wait = absl::Now();
    SEAM_RETURN_IF_ERROR(rank.groups->Synchronize(wait + self->options.comm_timeout));
    rank.synchronize_seconds = absl::ToDoubleSeconds(absl::Now() - wait);
    // Handoffs leave on the host (for UCX) or on the GPU (a device transport); logits for sampling.
    SEAM_ASSIGN_OR_RETURN(rank.handoff, Leaving(rank.handoff, device, self->options.handoff_on_device));
    return leave(logits);
  });
  if (!run.ok()) {
    g.broken = run;
    return run;
  }
  g.next_dp = next_dp;
  g.dp_of.insert(placed.begin(), placed.end());
  if (bucket > 0) {
    ++g.graph_stats.replays[bucket];
  } else {
    ++g.graph_stats.eager_steps;
  }

  PieceOutput out;
  if (!last) {
    for (int r = 0; r < g.tp; ++r) out.handoff.push_back(std::move(g.ranks[r]->handoff));
    return out;
  }
  if (choose) {
    for (size_t i = 0; i < sequences.size(); ++i) {
      const auto [dp, row] = where[i];
      out.tokens.push_back(g.ranks[dp * g.attn_tp()]->tokens.at(static_cast<size_t>(row)));
    }
    return out;
  }
  for (size_t i = 0; i < sequences.size(); ++i) {
    const auto [dp, row] = where[i];
    const Tensor& logits = g.ranks[dp * g.attn_tp()]->logits;
    const int64_t count = all_logits ? static_cast<int64_t>(sequences[i].tokens.size()) : 1;
    out.logits.push_back(logits.Rows(row, count).Clone());
  }
  return out;
}

absl::Status StageGroup::Free(uint64_t sequence) {
  Impl& g = *impl_;
  const int dp = DpGroupOf(sequence);
  if (dp < 0) return absl::NotFoundError(absl::StrCat("sequence ", sequence, " is not on this stage group"));
  for (int a = 0; a < g.attn_tp(); ++a) {
    models::KvCache& cache = *g.ranks[dp * g.attn_tp() + a]->cache;
    if (cache.Has(sequence)) SEAM_RETURN_IF_ERROR(cache.Free(sequence));
  }
  g.dp_of.erase(sequence);
  return absl::OkStatus();
}

}  // namespace seam::runtime
