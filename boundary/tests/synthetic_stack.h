// A synthetic decoder stack for exact-arithmetic tests of the boundary:
// attention and FFN compute that are linear (plus ReLU) maps over small
// dyadic weights, sharded over attention TP and TP exactly as a real model
// shards its projections. Every partial sum is exact in fp32, and compute
// rounds its (normalized) input back onto a 1/8 grid, so any correct
// distributed run equals the single-rank run bit for bit.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "seam/boundary/branch.h"
#include "seam/boundary/deferred_finalize.h"
#include "seam/boundary/forward_batch.h"
#include "seam/boundary/fusion.h"
#include "seam/boundary/layer_stack.h"
#include "seam/boundary/mhc.h"
#include "seam/boundary/operation_schedule.h"
#include "seam/boundary/pipeline_handoff.h"
#include "seam/boundary/reduction_policy.h"
#include "seam/boundary/stage_boundary.h"
#include "seam/boundary/stream_ops.h"
#include "seam/boundary/two_batch.h"

namespace seam::boundary::testing {

inline constexpr int64_t kHidden = 16;
inline constexpr int64_t kAttnInner = 16;  // sharded over attention TP
inline constexpr int64_t kFfnInner = 32;   // sharded over TP

// Deterministic dyadic values: multiples of `step` in [-limit, limit].
std::vector<float> DyadicValues(uint64_t seed, int64_t count, float step, float limit);

struct StackConfig {
  int layers = 2;
  ReductionPolicy policy = ReductionPolicy::kAr;
  uint64_t seed = 7;
  // Stages each layer declares, in order: 'A' attention (ALWAYS_PARTIAL),
  // 'M' mixer (EXIT_SCOPED attention), 'N' mixer that does not gather its
  // attention-TP input (its compute gathers it), 'F' dense FFN, 'C' dense FFN
  // whose compute completes its own sum (output_complete), 'T' dense FFN run
  // on the operation-scheduled path (CompleteNow instead of Finish), 'E' MoE
  // FFN of two experts (e_k = (k + 1) · the dense output, scales 1/2 and 3/4)
  // that hands its finalize to the final norm when its provider accepts,
  // 'B' that MoE (never deferring) with a LongCat-like branch prepared from
  // its input: dense FFN, attention, dense FFN, merged back into its output,
  // 'L' a dense FFN with a LoRA-like part every rank computes in full (added on
  // TP rank 0) that leaves its sum to the next input only when its provider
  // (StackConfig::fusions) accepts the batch.
  std::string pattern = "AF";
  // Layers this rank builds, [first_layer, end_layer) of the whole stack
  // (end_layer -1: all). Neighbours on other ranks come from the pattern.
  int first_layer = 0;
  int end_layer = -1;
  // false: weights divided by 3 and no grid rounding, so sums round and their
  // order matters (for checks that must hold bit for bit even then).
  bool exact = true;
  // Fusion provider of every 'E' stage, and the final norm's finalize service.
  std::shared_ptr<FusionProvider> fusions;
  FinalizeNormService* finalize_norm = nullptr;
  // > 0: every stage's update and read are MHC's over this many streams
  // (coefficients from MhcCoefficientsOf), and the final read collapses them.
  int mhc_streams = 0;
  // Attention-like stages prepare with capture and capture_gathered, and the
  // final norm captures, into the stack's collectors.
  bool capture = false;
  // Every stage's update is a plain add applied at its own exit (applied_at_exit).
  bool applied_at_exit = false;
  // Every gathering attention's read declares reads_after_attn_tp_gather.
  bool reads_all_rows = false;
  // The final read's own attention-TP gather (FinalNormOptions::attn_tp_gather).
  AttnTpGatherFn final_gather;
  // Every gathering attention's read, and the final read, declare
  // gathering_reads and offer a declining then a gather-then-norm candidate.
  bool gathering_reads = false;
  // Every FFN's read runs after the attention-DP gather (reads_before_dp_gather = false).
  bool ffn_reads_after_dp_gather = false;
  // Every dense 'F' FFN declares an output transform (max(y, 0) / 2, not linear)
  // inside its update (TransformedUpdate).
  bool output_transform = false;
  // Every 'A' attention mixes tokens causally: each row adds (1/32 of) the
  // grid values of every earlier row of its sequence, read through
  // GatherContext (a context-parallel batch gathers its context there).
  bool causal_mix = false;
};

// Dyadic MHC coefficients of stage `index` of `layer` (layer -1: the final read).
MhcCoefficients MhcCoefficientsOf(uint64_t seed, int layer, int index, int streams);

// The declaration of a stage letter of StackConfig::pattern.
StageDeclaration DeclarationOf(char kind);

// One rank's copy of the stack: its weight shards, norms and boundaries.
class SyntheticStack {
 public:
  // Builds the layers inside a layer stack bound to `topology`.
  static absl::StatusOr<std::unique_ptr<SyntheticStack>> Build(const StackConfig& config, const Topology& topology);
  // Runs the forward for `batch` (its stream started here) on `input` rows
  // (this rank's stack input rows); returns this rank's final-norm DP rows.
  absl::StatusOr<Tensor> Forward(ForwardBatch& batch, const Tensor& input) const;
  // Pipeline pieces: the first rank starts and hands over; a later rank takes
  // the handoff, and the last one ends with the final norm.
  absl::StatusOr<PipelineTensors> ForwardToPp(ForwardBatch& batch, const Tensor& input) const;
  absl::StatusOr<PipelineTensors> ForwardBetween(ForwardBatch& batch, const PipelineTensors& in) const;
  absl::StatusOr<Tensor> ForwardFromPp(ForwardBatch& batch, const PipelineTensors& in) const;

  // One stage: its norm, this rank's weight shards and its boundary.
  // Attention-like stages shard kAttnInner over attention TP; FFNs shard
  // kFfnInner over TP. w_in is [inner shard, H], w_out is [H, inner shard].
  struct Stage {
    char kind = 'A';
    NormParams norm;
    std::vector<float> w_in, w_out;
    std::shared_ptr<StageBoundary> boundary;
    std::shared_ptr<const ResidualReadout> read;  // MHC stacks only
    std::vector<Stage> branch;                    // 'B' only
  };
  struct Layer {
    std::vector<Stage> stages;
  };
  const std::vector<Layer>& layers() const { return layers_; }
  // One stage: prepare → compute → finish (an FFN of an operation-scheduled
  // batch: CompleteNow) on `h`, the batch's latest value.
  absl::StatusOr<Hidden> RunStage(const Stage& stage, ForwardBatch& batch, Hidden h) const;

  // Two-batch overlap of the forward: the stream starts on the whole batch,
  // the first `split_after` stages run on it, then it splits into two
  // operation-scheduled microbatches (a_dp_rows) that run one operation per
  // remaining stage, plus the final norm, interleaved as `order` says; the
  // two final-norm outputs are merged (merge_streams: the streams are merged
  // before the final norm instead, which then runs on the whole batch).
  struct TwoBatchRun {
    std::vector<int64_t> a_dp_rows;
    TboOrder order = TboOrder::kAlternate;
    int split_after = 0;
    bool merge_streams = false;
  };
  absl::StatusOr<Tensor> ForwardTwoBatch(ForwardBatch& batch, const Tensor& input, const TwoBatchRun& run) const;
  const NormParams& final_norm() const { return final_norm_; }
  // Captures of the last forward (capture = true): prepare, prepare gathered, final norm.
  const AuxCollector& captured() const { return captured_; }
  const AuxCollector& gathered() const { return gathered_; }
  const AuxCollector& final_captured() const { return final_captured_; }

 private:
  absl::StatusOr<Hidden> RunLayers(ForwardBatch& batch, Hidden h) const;
  const StageBoundary& first_stage() const { return *layers_.front().stages.front().boundary; }

  Topology topology_;
  bool exact_ = true;
  bool causal_mix_ = false;
  FinalizeNormService* finalize_norm_ = nullptr;
  std::vector<Layer> layers_;
  NormParams final_norm_;
  std::shared_ptr<const ResidualReadout> final_read_;
  bool capture_ = false;
  AttnTpGatherFn final_gather_;
  mutable AuxCollector captured_, gathered_, final_captured_;
  FinalNormOptions FinalOptions() const;
};

// The stack input of every token of a batch (all DP groups' rows in order).
Tensor StackInput(uint64_t seed, int64_t rows);

// Rows of `x` (this rank's compute rows) plus 1/32 of the causal prefix sum
// over each row's sequence of the grid values of the whole context.
absl::StatusOr<Tensor> CausalMix(const Tensor& x, ForwardBatch& batch);

// This rank's input rows for `variant`: its DP rows, or its slice of them.
Tensor RankInput(const Tensor& all_rows, const BatchRows& rows, BatchVariant variant);

}  // namespace seam::boundary::testing
