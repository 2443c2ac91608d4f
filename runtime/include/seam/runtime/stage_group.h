// StageGroup: one pipeline stage's TP group, as rank threads. Each of the
// tp ranks is a thread with its model shards (models::DecoderModel) and its
// models::KvCache (sized from memory: kv_sizing.h); the ranks join over
// Gloo on the host, or over NCCL on CUDA, where TP rank r computes on GPU
// first_gpu + r on a stream of its own (its NCCL communicators enqueue
// there too). A group may hold one pipeline piece, a layer range: a step
// then takes and returns one handoff per TP rank.
// A step is planned, then run (step_plan.h): Plan decides, from the step
// and the group's state alone, where each sequence lives (the attention-DP
// group the step names: the coordinator's decision; a sequence stays there,
// with its KV cache), the rows, the cache blocks and state slots it takes,
// the batch variant, whether a CUDA graph replays it and what it returns;
// Run executes that plan on every rank (a DP group with no sequence in the
// step still joins every collective). StepPiece is the two together.
// Decode graphs (runtime::DecodeGraph, one per bucket of
// StageGroupOptions::graph_buckets) are captured when the group starts, on
// every piece, and only replayed by steps; their tokens equal the eager
// step's. Given the same steps every piece plans alike, so TP rank r of one
// piece feeds TP rank r of the next.
// Driven by one thread: Create, Plan, Run, StepPiece, StepFed and Free must
// not run concurrently.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "seam/boundary/ipc_fusion.h"
#include "seam/boundary/pipeline_handoff.h"
#include "seam/boundary/reduction_policy.h"
#include "seam/boundary/variant_choice.h"
#include "seam/models/kv_cache.h"
#include "seam/core/device.h"
#include "seam/core/step_limits.h"
#include "seam/models/decoder_model.h"
#include "seam/runtime/kv_sizing.h"
#include "seam/runtime/step_plan.h"
#include "seam/runtime/token_sampler.h"
#include "seam/weights/model_config.h"

namespace seam::runtime {

// The prefill sequences a mixed graph takes beside a full decode bucket.
inline constexpr int64_t kMixedGraphExtraSequences = 16;

struct StageGroupOptions {
  // What every rank's model takes, whole: its dtype, its layers
  // ([first_layer, end_layer): the piece; end_layer -1: to the last layer),
  // its MoE and Mamba kernel choices (defer_moe_finalize, moe_experts,
  // mamba_scan). The group sets each rank's topology, device and fusions,
  // and the policy Create resolves.
  models::ModelOptions model;
  models::KvCacheOptions cache;  // each rank's cache: block size and dtype (its size comes from `kv`)
  KvSizing kv;                   // how many bytes each rank's cache takes
  absl::Duration comm_timeout = absl::Seconds(30);  // longest any collective waits for peers
  absl::Duration rank_deadline = absl::Seconds(120);  // longest Create or Step waits for a rank
  // Where the ranks compute: the host (ranks joined over Gloo), or CUDA, where
  // TP rank r uses GPU first_gpu + r and the ranks join over NCCL. Handoffs and logits
  // cross the group's boundary as host tensors either way (but see handoff_on_device).
  Device::Kind device = Device::Kind::kCPU;
  int first_gpu = 0;  // CUDA: TP rank r uses GPU first_gpu + r
  // CUDA, bf16, TP > 1: the one-shot IPC all-reduce + add + RMSNorm at stage
  // inputs (boundary/ipc_fusion.h). kAuto measures both paths when the group
  // starts and fuses only the token counts where the fused one is no slower.
  boundary::IpcFusionOptions allreduce_fusion{boundary::AllReduceFusionMode::kOff};
  // Which batch variant each eager step runs as (boundary/variant_choice.h):
  // kAuto picks unpadded / input-scattered / ordinary per batch; sequence
  // parallel when configured. CUDA-graph decode steps run as captured
  // (ordinary). Every rank and every stage of a pipeline decides alike.
  boundary::VariantChoiceOptions variants;
  // Context-parallel ranks inside the TP group (without attention DP): the
  // attention is split over tp / attn_cp ranks and replicated over the CP
  // ranks; a prefill batch that `variants` runs CONTEXT_PARALLEL (under auto:
  // from variants.cp_min_rows rows) splits its sequences' tokens over them.
  // Decode batches run ordinary. 1: no CP ranks.
  int attn_cp = 1;
  // CUDA: decode steps (one token per sequence) replay CUDA graphs captured
  // per bucket: the step's largest DP group's sequence count rounded up to
  // the next bucket (ascending, positive); every DP group pads to it. Every
  // bucket is captured when the group starts (a non-first piece takes the
  // handoff form its producer's declaration names). Prefill steps, steps
  // past the largest bucket or past graph_max_context, MoE pieces running
  // experts one by one and non-first pieces at attention TP > 1 run
  // eagerly. Empty: every step eager. Ignored on the host.
  std::vector<int64_t> graph_buckets;
  // CUDA: steps that hold prefill chunks (beside decode rows or not) replay
  // mixed graphs (DecodeGraph with rows) captured at start for these token
  // rows per attention-DP group (ascending; a step pads up to the next),
  // each taking up to min(rows - 1, the largest graph bucket +
  // kMixedGraphExtraSequences) sequences. Rows past max_step_tokens (per
  // DP group) or past what the model records are dropped; off with
  // graph_buckets empty, for models with Mamba state or latent caches, and
  // for steps returning every token's logits. Empty: such steps run eagerly.
  std::vector<int64_t> mixed_graph_rows;
  // The longest context a graph-replayed sequence may reach (the graphs'
  // block-table width); capped by the model's max_position_embeddings and by
  // what one DP group's cache holds.
  int64_t graph_max_context = kDefaultGraphMaxContext;
  // CUDA: the largest TP size at which decode steps are fed on the device
  // (CanStepFed). 1 until fed steps in TP groups have been run on GPUs of
  // this tree; tests and benchmarks raise it.
  int fed_decode_max_tp = 1;
  // CUDA: a non-last piece's handoffs stay on each rank's GPU (for a device
  // transport between stages, stage_server/handoff/device_handoff.h) instead
  // of being copied to the host. Ignored on the host.
  bool handoff_on_device = false;
};

// How a CUDA group's decode steps ran (StageGroup::GraphStats).
struct GraphDecodeStats {
  std::vector<int64_t> captured;       // buckets with a graph, ascending
  std::map<int64_t, int64_t> replays;  // steps replayed per bucket
  int64_t eager_steps = 0;             // steps run eagerly (prefill, no bucket, graphs off)
  std::vector<int64_t> mixed_captured;       // mixed graphs' rows per DP group, ascending
  std::map<int64_t, int64_t> mixed_replays;  // steps replayed per mixed graph
  std::string mixed_off_reason;              // why mixed graphs are off ("" when on)
  int64_t buffer_bytes = 0;            // rank 0's fixed graph buffers
  int64_t captured_bytes = 0;          // GPU memory rank 0 lost over its captures (driver's free bytes)
  std::string off_reason;              // why graphs are off ("" when on)
  std::string ToString() const;
};

// What bounds one step of a group, as it sized itself (reported in
// StageStatus.limits; defaults in seam/core/step_limits.h).
struct StepLimits {
  int64_t max_step_tokens = 0;           // token rows of one step over all DP groups (kv.max_step_tokens)
  int64_t kv_block_size = 0;
  int64_t kv_blocks_per_dp_group = 0;    // every rank of every DP group holds as many
  int64_t state_slots_per_dp_group = 0;  // Mamba sequences at once; 0: no state
  std::vector<int64_t> graph_buckets;    // captured decode graphs (sequences per DP group)
  int64_t graph_max_context = 0;         // 0 without graphs
  int64_t max_context = 0;               // max_position_embeddings, at most one DP group's cache
};

// What one piece returns for a step.
struct PieceOutput {
  // Non-last piece: the handoff of each TP rank, index = TP rank: contiguous
  // host tensors, or with handoff_on_device contiguous tensors on TP rank r's
  // GPU (finished; possibly a decode graph's buffers, valid until the next step).
  std::vector<boundary::PipelineTensors> handoff;
  // Last piece: logits per sequence, as Step returns them; or, when the step
  // was given token choices, one chosen token per sequence (input order)
  // and no logits: the logits never leave the device.
  std::vector<Tensor> logits;
  std::vector<int32_t> tokens;
  // With token choices: each sequence's log-probs, empty where its choice
  // asks for none (computed where the logits are, token_sampler.h).
  std::vector<TokenLogprobs> logprobs;
};

// A decode step fed on the device (StageGroup::StepFed), by which a later
// step feeds its chosen tokens and FedTokens reads them.
struct FedStep {
  int64_t slot = -1;
  uint64_t generation = 0;
  int64_t sequences = 0;
};

// The TP rank a failed Create or step names (its status carries it), if any.
std::optional<int> FailedTpRank(const absl::Status& status);

class StageGroup {
 public:
  // Opens the checkpoint, starts tp rank threads, joins their Gloo groups and
  // loads each rank's shards. `policy` may be kAuto (resolved for the
  // checkpoint's architecture). INVALID_ARGUMENT for sizes that do not divide.
  static absl::StatusOr<std::unique_ptr<StageGroup>> Create(const std::string& model_dir, int tp, int attn_dp,
                                                            boundary::ReductionPolicy policy,
                                                            const StageGroupOptions& options = {});
  ~StageGroup();

  const weights::ModelConfig& config() const;
  int tp() const;
  int attn_dp() const;
  int first_layer() const;
  int end_layer() const;         // resolved: never -1
  int attn_cp() const;           // context-parallel ranks (StageGroupOptions::attn_cp)
  bool is_first_piece() const { return first_layer() == 0; }
  bool is_last_piece() const { return end_layer() == config().num_hidden_layers; }
  boundary::ReductionPolicy policy() const;  // resolved for the architecture: never kAuto
  bool on_gpu() const;
  // The DP group a sequence lives on, or -1 when it has none yet.
  int DpGroupOf(uint64_t sequence) const;
  // Free KV blocks of attention-DP group `dp` (as each of its ranks sees them).
  int64_t FreeBlocks(int dp) const;
  // Blocks of each DP group's cache (every rank holds as many) and tokens per block.
  int64_t KvBlocksPerDpGroup() const;
  int64_t KvBlockSize() const;
  // What bounds a step of this group: the figures a stage reports.
  StepLimits Limits() const;
  // What rank 0 measured and chose for the all-reduce fusion, and how many
  // sums it has fused so far ("" when there is no fusion).
  std::string FusionReport() const;
  // Which decode steps replayed a CUDA graph, per bucket, and which ran eagerly.
  GraphDecodeStats GraphStats() const;
  // Per TP rank, the seconds the last step waited in its one Synchronize
  // (the stream and the step's collectives): the collective time as far as
  // the host sees it (on CPU ranks Gloo's collectives are synchronous, so
  // this is near zero there).
  std::vector<double> LastSynchronizeSeconds() const;

  // Plans one pipeline piece of a step (step_plan.h's PlanStep against the
  // group's present state): the same `sequences` (same order) that every
  // piece of the pipeline runs; `in`: the previous piece's handoff, one per
  // TP rank (empty on the first piece, tp() entries otherwise); `choices`
  // (last piece, without all_logits; one per sequence, input order): the
  // step returns tokens chosen where the logits are (token_sampler.h)
  // instead of logits. Runs nothing and changes nothing. Errors as
  // PlanStep's (INVALID_ARGUMENT for a malformed step, a DP group out of
  // range, unnamed where there are several or other than the sequence's;
  // RESOURCE_EXHAUSTED when a DP group's cache cannot take the step), and
  // FAILED_PRECONDITION once the group has failed.
  absl::StatusOr<StepPlan> Plan(const std::vector<models::SequenceStep>& sequences, bool all_logits,
                                const std::vector<boundary::PipelineTensors>& in,
                                const std::vector<TokenChoice>* choices = nullptr) const;
  // Runs `plan` with the `in` and `choices` it was made with: handoffs on a
  // non-last piece; on the last, fp32 logits per sequence in input order
  // ([tokens, vocab] with all_logits, [1, vocab] otherwise) or the chosen
  // tokens. FAILED_PRECONDITION for a plan made before the group's last
  // step or Free (nothing run). A failing rank fails the step with its
  // status prefixed by "rank r (dp d, attn_tp a)", and the group refuses
  // later steps with FAILED_PRECONDITION.
  absl::StatusOr<PieceOutput> Run(const StepPlan& plan, const std::vector<boundary::PipelineTensors>& in,
                                  const std::vector<TokenChoice>* choices = nullptr);
  // Plan, then Run.
  absl::StatusOr<PieceOutput> StepPiece(const std::vector<models::SequenceStep>& sequences, bool all_logits,
                                        const std::vector<boundary::PipelineTensors>& in,
                                        const std::vector<TokenChoice>* choices = nullptr);
  // StepPiece of the whole model (no handoffs); its logits.
  // FAILED_PRECONDITION on a group built for a layer range.
  absl::StatusOr<std::vector<Tensor>> Step(const std::vector<models::SequenceStep>& sequences, bool all_logits);
  // Decode steps fed on the device (fed_decode.cc): a whole-model CUDA
  // group with graph decode, one attention-DP group and no CP ranks, runs a
  // decode step as a graph replay whose tokens are chosen on the device
  // (by TP rank 0, then broadcast over the TP communicator to every rank)
  // and stay there, so that the next step of the same sequences takes them
  // as its input without a round trip through the host, and returns once
  // the step is enqueued: the host's work for the next step overlaps this
  // one's on the GPU. The tokens equal StepPiece's with the same choices.
  // A failed step, or a wait for its tokens past comm_timeout, breaks the
  // group and aborts the communicators whose streams had not finished.
  // Whether `sequences` can run as a fed step: this group can, each
  // sequence is placed and has one token, and a graph bucket holds them.
  bool CanStepFed(const std::vector<models::SequenceStep>& sequences) const;
  // Enqueues one fed step. `choices`: one per sequence (as StepPiece).
  // `feed`: null, or an earlier fed step of the same sequences in the same
  // order whose chosen tokens this step takes instead of sequences[i].tokens
  // (FAILED_PRECONDITION when it is stale or of other sequences). The
  // returned step stays readable (FedTokens) and feedable for the next
  // 63 fed steps. Errors as StepPiece; FAILED_PRECONDITION where
  // CanStepFed is false.
  absl::StatusOr<FedStep> StepFed(const std::vector<models::SequenceStep>& sequences,
                                  const std::vector<TokenChoice>& choices, const FedStep* feed);
  // The tokens `step` chose (input order), once they have reached the host:
  // waits for the step, up to the group's comm_timeout (DEADLINE_EXCEEDED).
  absl::StatusOr<std::vector<int32_t>> FedTokens(const FedStep& step);

  // Returns a sequence's blocks on its DP group; NOT_FOUND for an unknown one.
  absl::Status Free(uint64_t sequence);
  // Prefix caching, on every rank of the DP group (models::KvCache's Share,
  // Publish and Evict, which name their errors; INVALID_ARGUMENT for a DP
  // group this stage does not have, NOT_FOUND for a sequence it does not hold).
  // Places `sequence` on `dp_group` with the cached blocks `ids` as its first.
  absl::Status ShareCached(uint64_t sequence, int dp_group, const std::vector<uint64_t>& ids);
  // Caches block `index` of `sequence` (on its DP group) as `id`.
  absl::Status PublishCached(uint64_t sequence, int64_t index, uint64_t id);
  absl::Status EvictCached(int dp_group, uint64_t id);

  struct Impl;

 private:
  explicit StageGroup(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace seam::runtime
