// StagePlan: the bound paths of one stage, built once when the layer stack
// binds it and then only read. For each batch variant the topology supports
// it holds the entry paths (one per form of input the producer can deliver)
// and the exit path (its fixed facts and ordered completion choices). A
// forward picks an existing path from batch facts; nothing is rebuilt.
// Plans are plain data: printable and comparable across ranks.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "seam/boundary/declaration.h"
#include "seam/boundary/forward_batch.h"
#include "seam/boundary/layout.h"
#include "seam/boundary/reduction_policy.h"
#include "seam/boundary/residual_stream.h"

namespace seam::boundary {

enum class CommGroup : uint8_t { kNone, kTp, kAttnTp, kAttnDp, kAttnCp };
const char* CommGroupName(CommGroup group);
CommGroup GroupCompleting(SumGroup sum);

// One step of a bound path. Steps act on the contribution (c), the residual
// (r) and the compute input (x) of the stage being entered or left.
enum class StepOp : uint8_t {
  kInitResidual,    // r ← the stack input; stream becomes written
  kSliceResidual,   // r: DP rows → this rank's `to` rows (slice, or CP rows), no communication
  kAllReduce,       // c summed over `group`
  kReduceScatter,   // c summed over `group`, fixed equal (padded) parts; c → `to` rows
  kReduceScatterV,  // c summed over `group` with per-rank counts; c → `to` rows (CP rows: the CP mapping)
  kTakeRows,        // c narrowed (or, to CP rows, row-gathered) to this rank's `to` rows (no communication)
  kAddBeforeSum,    // every row's residual added into c by exactly one rank, before the sum
  kWriteResidual,   // r ← c; stream becomes written
  kFusedInput,      // fusion candidates, else all-reduce over `group` + add + norm
  kUpdateAndRead,   // r ← r + c; x ← norm of the fp32 sum
  kRead,            // x ← norm(r)
  kGather,          // x moved `from` → `to` rows over `group`, padded fixed parts
  kGatherV,         // the same with per-rank counts, unpadded (attn_cp: CP rows back to natural order)
  kApplyUpdate,     // r ← the producer's update of r with c (completed); stream becomes written
  // A read on this rank's attention-TP slice followed by the gather onto the
  // DP rows (`group` attn_tp), as one step: the read's gathering reads are
  // tried first, else the read then the built-in gather.
  kReadGather,        // x ← gather(norm(r))
  kUpdateReadGather,  // r ← r + c; x ← gather(norm of the sum)
  // A read after the gather (reads_before_dp_gather = false, or a read of
  // every row on a residual kept on slices): the updated residual is moved,
  // then read on the moved rows. The residual itself stays where it was.
  kGatherResidual,  // x ← r moved `from` → `to` over `group` (padded or variable, by variant)
  kReadGathered,    // x ← norm(x)
};
const char* StepOpName(StepOp op);

struct Step {
  StepOp op;
  CommGroup group = CommGroup::kNone;
  RowForm from = RowForm::kDpRows;
  RowForm to = RowForm::kDpRows;
  bool issues_collective() const;
  std::string ToString() const;  // "all_reduce(tp)", "gather(attn_dp: dp_rows→ffn_rows)"
};

// What a stage's entry receives: the stream state, the contribution's rows and
// owed sum (pending only) and the residual's rows (written/pending).
struct IncomingForm {
  StreamState state = StreamState::kInitial;
  RowForm rows = RowForm::kDpRows;
  SumGroup owed = SumGroup::kNone;
  RowForm residual = RowForm::kDpRows;
  bool operator==(const IncomingForm& o) const;
  std::string ToString() const;
};

struct EntryPath {
  IncomingForm incoming;
  std::vector<Step> steps;
  RowForm residual_after = RowForm::kDpRows;
  RowForm compute_rows = RowForm::kDpRows;
};

// How an exit may leave its output.
enum class ExitChoice : uint8_t {
  kRegisterPartial,     // attention: record the partial sum for the next input
  kLeaveToNextInput,    // leave the sum (and row return) to the next stage's input
  kCompleteAllReduce,   // complete now with an all-reduce, then return to own rows
  kReduceScatterV,      // complete now with a variable reduce-scatter onto own slice
  kReduceScatterFixed,  // complete now with a fixed (padded) reduce-scatter onto own slice
  kReduceScatterCp,     // complete now with a reduce-scatter onto own CP rows (the CP mapping)
  kDeferFinalize,       // terminal MoE: hand the finalize (and its sum) to the final norm
};
const char* ExitChoiceName(ExitChoice choice);

struct ExitOption {
  ExitChoice choice;
  RowForm residual;              // residual rows this option applies to
  std::vector<Step> steps;       // completion work run at the exit
  IncomingForm leaves;           // what the next entry then receives
};

// Facts decided when the plan is built.
struct ExitFacts {
  bool terminal = false;
  bool may_leave_to_next_input = false;
  bool fixed_rs_eligible = false;
  bool rsv_eligible = false;
  bool rsv_first = false;
  // Leaving the sum to the next input needs the provider's per-batch consent.
  bool leave_needs_provider = false;
};

struct ExitPath {
  ExitFacts facts;
  std::vector<ExitOption> options;  // in preference order, per residual form
};

struct VariantPaths {
  BatchVariant variant;
  std::vector<EntryPath> entries;
  ExitPath exit;
  // Terminal stages only: the final read's entry paths (final norm after this stage).
  std::vector<EntryPath> final_read;
  const EntryPath* FindEntry(const IncomingForm& incoming) const;
  const EntryPath* FindFinalRead(const IncomingForm& incoming) const;
};

// Facts of a neighbouring stage that binding reads (capabilities, not objects).
struct NeighbourFacts {
  bool exists = false;
  StageDeclaration declaration;
  // Without a next stage: the capabilities of the stack's final read, the
  // last stage's consumer (LayerStackOptions::final_read).
  ReadoutCaps final_read;
};

struct StagePlan {
  StageDeclaration declaration;
  NeighbourFacts producer;  // the stage before it (possibly on another pipeline rank)
  Topology topology;
  ReductionPolicy policy = ReductionPolicy::kAr;
  std::vector<VariantPaths> variants;
  const VariantPaths* Find(BatchVariant variant) const;
};

// Builds the plan of `stage` between `producer` and `consumer` (either may be
// absent: stack start / terminal). INVALID_ARGUMENT for a transition with no
// correct implementation.
absl::StatusOr<StagePlan> BuildStagePlan(const StageDeclaration& stage, const NeighbourFacts& producer,
                                         const NeighbourFacts& consumer, const Topology& topology,
                                         ReductionPolicy policy);

// The entry paths of the final read (final norm) after `last` (always bound),
// whose capabilities are `final_read`.
std::vector<EntryPath> BuildFinalReadEntries(BatchVariant variant, const Topology& topology,
                                             const StageDeclaration& last, ReductionPolicy policy,
                                             const ReadoutCaps& final_read);

// Entry path for `incoming` into a consumer computing on `compute_rows`
// whose read has `caps` (a pure function; used by plans, the final norm and
// stream helpers).
EntryPath BuildEntryPath(const IncomingForm& incoming, RowForm compute_rows, BatchVariant variant,
                         const Topology& topology, bool fusable, const ReadoutCaps& caps = {});

// Steps that complete a contribution's owed sum and land it on `target` rows.
std::vector<Step> CompletionSteps(RowForm rows, SumGroup owed, RowForm target, BatchVariant variant,
                                  const Topology& topology);

}  // namespace seam::boundary
