// StageGroup's creation and facts: rank threads joined over Gloo (host) or
// NCCL (CUDA), each with its model shards and KV cache, every wait bounded
// by a deadline. Steps are planned and run in stage_group_run.cc, graphs
// set up in stage_group_graphs.cc.
#include "seam/runtime/stage_group.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <limits>

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
#include "src/rank_worker.h"
#include "src/stage_group_impl.h"

namespace seam::runtime {
namespace {

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
int StageGroup::first_layer() const { return impl_->options.model.first_layer; }
int StageGroup::end_layer() const { return impl_->options.model.end_layer; }
int StageGroup::attn_cp() const { return impl_->options.attn_cp; }

boundary::ReductionPolicy StageGroup::policy() const { return impl_->policy; }
bool StageGroup::on_gpu() const { return impl_->options.device == Device::Kind::kCUDA; }
int64_t StageGroup::KvBlocksPerDpGroup() const { return impl_->kv_blocks; }
int64_t StageGroup::KvBlockSize() const { return impl_->options.cache.block_size; }

StepLimits StageGroup::Limits() const {
  const Impl& g = *impl_;
  StepLimits l;
  l.max_step_tokens = g.options.kv.max_step_tokens;
  l.kv_block_size = g.options.cache.block_size;
  l.kv_blocks_per_dp_group = g.kv_blocks;
  const models::MambaStateCache* states = g.ranks[0]->cache->states();
  l.state_slots_per_dp_group = states == nullptr ? 0 : states->slots();
  l.graph_buckets = g.graph_stats.captured;
  l.graph_max_context = l.graph_buckets.empty() ? 0 : g.graph_max_context;
  l.max_context = std::min<int64_t>(config().max_position_embeddings, g.kv_blocks * l.kv_block_size);
  return l;
}

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
  std::vector<std::string> per_mixed;
  for (const auto& [rows, count] : mixed_replays) per_mixed.push_back(absl::StrCat(rows, ": ", count));
  const std::string mixed = mixed_off_reason.empty()
                                ? absl::StrCat("mixed graphs [", absl::StrJoin(mixed_captured, ", "), "] rows, replays {",
                                               absl::StrJoin(per_mixed, ", "), "}")
                                : absl::StrCat("mixed graphs off: ", mixed_off_reason);
  return absl::StrCat("CUDA graph decode: buckets [", absl::StrJoin(captured, ", "), "] captured; replays {",
                      absl::StrJoin(per_bucket, ", "), "}; ", mixed, "; ", eager_steps, " eager steps");
}

int64_t StageGroup::FreeBlocks(int dp) const { return impl_->ranks[dp * impl_->attn_tp()]->cache->free_blocks(); }

namespace {

// Rank r's process groups; on CUDA they enqueue on the rank's stream.
absl::Status JoinGroups(RankState& rank, int r, int tp, int attn_dp, int attn_cp,
                        const comm::CommunicatorFactory& factory, Device device) {
  SEAM_ASSIGN_OR_RETURN(rank.topology, boundary::Topology::Make(tp, attn_dp, r, attn_cp));
  SEAM_ASSIGN_OR_RETURN(rank.groups, comm::ProcessGroups::Create(comm::Topology{tp, attn_dp, 1, attn_cp}, r, factory));
  if (device.is_cuda()) {
    const comm::ProcessGroups& g = *rank.groups;
    for (comm::Communicator* c : {&g.tp(), &g.attn_tp(), &g.attn_dp(), &g.attn_cp()}) {
      if (auto* nccl = dynamic_cast<comm::NcclCommunicator*>(c)) nccl->SetStream(rank.stream.handle());
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<int64_t> StageGroup::Impl::LoadRank(int r, const comm::CommunicatorFactory& factory,
                                                   const std::shared_ptr<comm::Store>& store) {
  RankState& rank = *ranks[r];
  const Device device = RankDevice(r);
  SEAM_RETURN_IF_ERROR(UseDevice(device));
  DeviceMemoryInfo before, after;
  int64_t pool_before = 0, used = 0;
  if (device.is_cuda()) {
    SEAM_ASSIGN_OR_RETURN(before, QueryDeviceMemory(device));
    SEAM_ASSIGN_OR_RETURN(pool_before, DevicePoolReservedBytes(device));
    // One stream per rank for its kernels, its memory and its collectives: a
    // CUDA graph captures one stream, and ranks sharing nothing wait on nothing else.
    SEAM_ASSIGN_OR_RETURN(rank.stream, CudaStream::Create(device));
    SetCurrentCudaStream(rank.stream.handle());
  }
  SEAM_RETURN_IF_ERROR(JoinGroups(rank, r, tp, attn_dp, options.attn_cp, factory, device));
  const StageGroupOptions& o = options;
  const weights::ModelConfig& config = checkpoint->config();
  if (o.model.dtype == DType::kBF16) {
    SEAM_ASSIGN_OR_RETURN(rank.fusions, boundary::MakeIpcFusionProvider(*rank.groups, store, device, config.hidden_size,
                                                                        o.allreduce_fusion, &rank.fusion_report));
  }
  models::ModelOptions model_options = o.model;
  model_options.topology = rank.topology;
  model_options.policy = policy;
  model_options.device = device;
  model_options.fusions = rank.fusions;
  SEAM_ASSIGN_OR_RETURN(rank.model, models::LoadDecoderModel(*checkpoint, model_options));
  if (device.is_cuda()) {
    SEAM_RETURN_IF_ERROR(SynchronizeStream(device));
    SEAM_ASSIGN_OR_RETURN(after, QueryDeviceMemory(device));
    SEAM_ASSIGN_OR_RETURN(const int64_t pool_after, DevicePoolReservedBytes(device));
    used = LoadedBytes(before.free_bytes - after.free_bytes, pool_after - pool_before);
  }
  // The rank's KV budget, from what its weights leave of its memory (kv_sizing.h).
  const int64_t reserve = ActivationReserveBytes(config, tp, rank.topology.attn_tp(), o.model.dtype, o.kv.max_step_tokens);
  return KvBudgetBytes(o.kv, device, used, after.total_bytes, after.free_bytes, reserve);
}

absl::Status StageGroup::Impl::Start(const comm::CommunicatorFactory& factory,
                                     const std::shared_ptr<comm::Store>& store) {
  for (int r = 0; r < tp; ++r) {
    ranks.push_back(std::make_unique<RankState>());
    workers.push_back(std::make_unique<internal::RankWorker>(r));
  }
  Impl* self = this;
  auto budgets = std::make_shared<std::vector<int64_t>>(tp, 0);
  SEAM_RETURN_IF_ERROR(RunOnAll([self, factory, store, budgets](int r) -> absl::Status {
    SEAM_ASSIGN_OR_RETURN((*budgets)[r], self->LoadRank(r, factory, store));
    return absl::OkStatus();
  }));
  // Every rank takes the least budget, so every DP group holds as many blocks.
  models::KvCacheOptions cache = options.cache;
  cache.budget_bytes = *std::min_element(budgets->begin(), budgets->end());
  SEAM_RETURN_IF_ERROR(RunOnAll([self, cache](int r) -> absl::Status {
    SEAM_RETURN_IF_ERROR(UseDevice(self->RankDevice(r)));
    RankState& rank = *self->ranks[r];
    models::KvCacheOptions mine = cache;
    mine.report_progress = r == 0;  // one rank shows it; the others allocate alike
    SEAM_ASSIGN_OR_RETURN(rank.cache, rank.model->MakeCache(mine));
    return absl::OkStatus();
  }));
  kv_blocks = ranks[0]->cache->num_blocks();
  return SetUpGraphs(checkpoint->config());
}

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
  const weights::ModelConfig& config = impl->checkpoint->config();
  if (options.model.end_layer < 0) impl->options.model.end_layer = static_cast<int>(config.num_hidden_layers);
  impl->policy = boundary::ResolveReductionPolicy(policy, config.architecture);
  if (config.is_longcat_flash()) {
    // Its branches serve ordinary token rows only (boundary/branch.h): the
    // automatic choice never scatters the input, a configured scatter is refused.
    const boundary::VariantChoiceOptions& v = options.variants;
    const bool fixed_scatter = v.mode == boundary::VariantMode::kFixed &&
                               (v.fixed == boundary::BatchVariant::kInputScattered ||
                                v.fixed == boundary::BatchVariant::kSequenceParallel);
    if (v.mode == boundary::VariantMode::kSequenceParallel || fixed_scatter) {
      return absl::InvalidArgumentError(absl::StrCat("longcat_flash's branches serve ordinary token rows only: ",
                                                     "batch variant choice ", boundary::VariantChoiceName(v),
                                                     " is not supported"));
    }
    impl->options.variants.scatter_input_rows = std::numeric_limits<int64_t>::max();
  }
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
  SEAM_RETURN_IF_ERROR(impl->Start(factory, store));
  return std::unique_ptr<StageGroup>(new StageGroup(std::move(impl)));
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
  ++g.version;
  return absl::OkStatus();
}

absl::Status StageGroup::ShareCached(uint64_t sequence, int dp_group, const std::vector<uint64_t>& ids) {
  Impl& g = *impl_;
  if (dp_group < 0 || dp_group >= g.attn_dp) {
    return absl::InvalidArgumentError(absl::StrCat("sequence ", sequence, " maps cached blocks on DP group ", dp_group,
                                                   "; this stage has ", g.attn_dp));
  }
  for (int a = 0; a < g.attn_tp(); ++a) {
    SEAM_RETURN_IF_ERROR(g.ranks[dp_group * g.attn_tp() + a]->cache->Share(sequence, ids));
  }
  g.dp_of[sequence] = dp_group;
  ++g.version;
  return absl::OkStatus();
}

absl::Status StageGroup::PublishCached(uint64_t sequence, int64_t index, uint64_t id) {
  Impl& g = *impl_;
  const int dp = DpGroupOf(sequence);
  if (dp < 0) return absl::NotFoundError(absl::StrCat("sequence ", sequence, " is not on this stage group"));
  for (int a = 0; a < g.attn_tp(); ++a) {
    SEAM_RETURN_IF_ERROR(g.ranks[dp * g.attn_tp() + a]->cache->Publish(sequence, index, id));
  }
  return absl::OkStatus();
}

absl::Status StageGroup::EvictCached(int dp_group, uint64_t id) {
  Impl& g = *impl_;
  if (dp_group < 0 || dp_group >= g.attn_dp) {
    return absl::InvalidArgumentError(
        absl::StrCat("evicting cached block ", id, " of DP group ", dp_group, "; this stage has ", g.attn_dp));
  }
  for (int a = 0; a < g.attn_tp(); ++a) {
    SEAM_RETURN_IF_ERROR(g.ranks[dp_group * g.attn_tp() + a]->cache->Evict(id));
  }
  ++g.version;
  return absl::OkStatus();
}

}  // namespace seam::runtime
