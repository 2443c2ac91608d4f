// The state behind StageGroup, shared by its source files (stage_group.cc:
// creation and the group's facts; stage_group_graphs.cc: decode graphs set
// up at start; stage_group_run.cc: planning and running steps;
// fed_decode.cc: decode steps fed on the device). Internal to seam_runtime.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "seam/comm/process_groups.h"
#include "seam/comm/store.h"
#include "seam/core/cuda_graph.h"
#include "seam/runtime/decode_graph.h"
#include "seam/runtime/stage_group.h"
#include "seam/runtime/step_plan.h"
#include "seam/weights/checkpoint.h"
#include "src/batch_variant_log.h"
#include "src/fed_slots.h"
#include "src/rank_worker.h"

namespace seam::runtime {
namespace internal {

struct RankState {
  // CUDA: the rank's stream (its kernels, memory and NCCL calls); declared
  // first so that it outlives everything freed on it.
  CudaStream stream;
  boundary::Topology topology;
  std::unique_ptr<comm::ProcessGroups> groups;
  std::unique_ptr<models::DecoderModel> model;
  std::unique_ptr<models::KvCache> cache;
  std::map<int64_t, std::unique_ptr<DecodeGraph>> graphs;  // by bucket; declared after what they use
  Tensor mixed_logits;  // the mixed graphs' shared logits buffer (last piece)
  std::map<int64_t, std::unique_ptr<DecodeGraph>> mixed_graphs;  // by rows per DP group
  Tensor logits;                     // the last step's output (last piece)
  std::vector<int32_t> tokens;       // or its DP group's chosen tokens (last piece, with choices)
  std::vector<TokenLogprobs> logprobs;  // and their log-probs where the choices ask
  boundary::PipelineTensors handoff;  // the last step's output (other pieces)
  double synchronize_seconds = 0;     // the last step's wait for its stream and collectives
  std::shared_ptr<boundary::IpcFusionProvider> fusions;  // null: no all-reduce fusion
  std::string fusion_report;                            // what it measured and chose
  std::unique_ptr<FedSlots> fed;  // chosen tokens of fed decode steps (made at the first one)
};

}  // namespace internal

struct StageGroup::Impl {
  std::string store_dir;
  std::unique_ptr<weights::Checkpoint> checkpoint;
  int tp = 1, attn_dp = 1;
  StageGroupOptions options;
  std::vector<std::unique_ptr<internal::RankState>> ranks;
  std::map<uint64_t, int> dp_of;  // the DP group each sequence lives on
  boundary::ReductionPolicy policy = boundary::ReductionPolicy::kAuto;  // resolved at Create
  int64_t kv_blocks = 0;                                                // per rank (all alike)
  uint64_t next_microbatch = 1;
  // Counts the changes of placement and caches (steps, frees): a plan made
  // at another count is stale.
  uint64_t version = 0;
  absl::Status broken;
  // CUDA graph decode (StageGroupOptions::graph_buckets).
  GraphDecodeStats graph_stats;  // off_reason "" while graphs are on
  BatchVariantLog variant_log;
  int64_t graph_max_context = 0;
  // A non-first piece: the handoff form its graphs take (from its producer's declaration).
  std::optional<HandoffForm> graph_in_form;
  std::vector<std::unique_ptr<internal::RankWorker>> workers;  // declared last: joined first

  ~Impl() {
    // Each rank releases its state on its own thread, all at once: tearing
    // down an IPC fusion waits for every peer's teardown.
    if (!workers.empty()) {  // Create pushes a rank state and a worker for each of the tp ranks together
      RunOnAll([this](int r) {
        ranks[r].reset();
        return absl::OkStatus();
      }).IgnoreError();
    }
    workers.clear();
    std::error_code ignored;
    if (!store_dir.empty()) std::filesystem::remove_all(store_dir, ignored);
  }
  int attn_tp() const { return tp / attn_dp; }
  // TP rank r computes on GPU first_gpu + r of a CUDA group, on the host otherwise.
  Device RankDevice(int r) const {
    return options.device == Device::Kind::kCUDA ? Device::CUDA(options.first_gpu + r) : Device::CPU();
  }
  std::string RankName(int r) const {
    return absl::StrCat("rank ", r, " (dp ", r / attn_tp(), ", attn_tp ", r % attn_tp(), ")");
  }
  // Runs a copy of fn(rank) on every rank thread and waits for all of them
  // until options.rank_deadline. A rank past the deadline finishes on its own
  // (its collectives have deadlines too); fn must therefore own what it uses,
  // apart from this Impl, whose destructor joins the rank threads.
  absl::Status RunOnAll(const std::function<absl::Status(int)>& fn);
  // After a failed step nobody waited for on the host (a fed step): each
  // rank's communicators whose streams have not finished are aborted (a
  // Synchronize with no time left), so no rank stays blocked in a
  // collective a failed peer never joins. The group is broken already.
  void AbortCollectives();
  // Loads every rank (its stream, groups, model shards, then its cache)
  // and sets up the decode graphs (stage_group.cc).
  absl::Status Start(const comm::CommunicatorFactory& factory, const std::shared_ptr<comm::Store>& store);
  // Rank r's stream, groups and model; returns its KV budget in bytes.
  absl::StatusOr<int64_t> LoadRank(int r, const comm::CommunicatorFactory& factory,
                                   const std::shared_ptr<comm::Store>& store);
  // Whether graphs run at all, their context limit and, on a non-first
  // piece, the handoff form they take (after the caches exist); then every
  // bucket captured on every rank.
  absl::Status SetUpGraphs(const weights::ModelConfig& config);
  // Every rank captures `buckets` (those it lacks), in order, on its stream;
  // with `mixed`, the mixed graphs of those rows per DP group instead.
  absl::Status CaptureGraphs(const std::vector<int64_t>& buckets, bool mixed = false);
  // The mixed graphs' rows this group captures (logs what it drops) and the
  // sequences each takes.
  void ChooseMixedGraphs(const weights::ModelConfig& config);
  std::vector<int64_t> mixed_sequences;  // same index as graph_stats.mixed_captured
  // What a plan reads (step_plan.h).
  StepPlanFacts PlanFacts() const;
  StepPlanState PlanState() const;
  // One rank's part of a planned step (stage_group_run.cc).
  struct RankJob;
  absl::Status RunRank(int r, const RankJob& job);
};

}  // namespace seam::runtime
