// Builds stage plans: which steps an entry runs for each form of input, and
// which completion choices an exit has. Everything here is decided from fixed
// facts (declarations, topology, policy, variant); nothing reads a batch.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "seam/boundary/plan.h"
#include "seam/core/status.h"

namespace seam::boundary {
namespace {

int GroupSize(CommGroup g, const Topology& t) {
  switch (g) {
    case CommGroup::kNone: return 1;
    case CommGroup::kTp: return t.tp;
    case CommGroup::kAttnTp: return t.attn_tp();
    case CommGroup::kAttnDp: return t.attn_dp;
    case CommGroup::kAttnCp: return t.attn_cp;
  }
  return 1;
}

bool Padded(BatchVariant v) { return v != BatchVariant::kUnpadded; }

// A sum over a one-rank group is already complete.
SumGroup Effective(SumGroup owed, const Topology& t) {
  return SumGroupSize(owed, t) > 1 ? owed : SumGroup::kNone;
}

// Residual row forms a stage of this variant can meet.
// UNPADDED (no attention DP) keeps every stage on the attention's rows;
// INPUT_SCATTERED and SEQUENCE_PARALLEL keep the residual on the slice;
// CONTEXT_PARALLEL on this rank's CP rows. Other batches of a topology with
// CP ranks stay on the DP rows (attention-TP slices repeat over CP ranks, so
// a TP reduce-scatter cannot land on them).
std::vector<RowForm> ResidualForms(BatchVariant v, const Topology& t, ReductionPolicy policy) {
  if (v == BatchVariant::kContextParallel) return {RowForm::kCpRows};
  if (v == BatchVariant::kInputScattered || v == BatchVariant::kSequenceParallel) return {RowForm::kAttnTpSlice};
  if (v == BatchVariant::kUnpadded) return {RowForm::kDpRows};
  const bool rsv = AllowsRsv(policy) && t.tp > 1 && t.attn_dp > 1;
  const bool rs = AllowsFixedRs(policy) && t.tp > 1 && Padded(v) && t.attn_cp == 1;
  if (rsv || rs) return {RowForm::kDpRows, RowForm::kAttnTpSlice};
  return {RowForm::kDpRows};
}

enum class Consumer { kAttnGathering, kAttnLocal, kFfn, kFinalRead };

Consumer ConsumerOf(const StageDeclaration& d) {
  if (d.kind == StageKind::kFfn) return Consumer::kFfn;
  return d.gathers_attn_tp_input ? Consumer::kAttnGathering : Consumer::kAttnLocal;
}

void AppendGather(RowForm from, RowForm to, BatchVariant v, const Topology& t, std::vector<Step>* steps) {
  if (from == to) return;
  CommGroup g = CommGroup::kNone;
  if (from == RowForm::kAttnTpSlice && to == RowForm::kDpRows) g = CommGroup::kAttnTp;
  if (from == RowForm::kDpRows && to == RowForm::kFfnRows) g = CommGroup::kAttnDp;
  if (from == RowForm::kAttnTpSlice && to == RowForm::kFfnRows) g = CommGroup::kTp;
  // CP rows back to natural order (no attention DP: the FFN rows are the DP rows).
  if (from == RowForm::kCpRows && (to == RowForm::kDpRows || to == RowForm::kFfnRows)) g = CommGroup::kAttnCp;
  SEAM_CHECK_MSG(g != CommGroup::kNone, "no gather from ", RowFormName(from), " to ", RowFormName(to));
  if (GroupSize(g, t) == 1) return;  // the rows are already the target rows
  const bool padded = Padded(v) && g != CommGroup::kAttnCp;
  steps->push_back(Step{padded ? StepOp::kGather : StepOp::kGatherV, g, from, to});
}

// The gather step `from` → `to` rows, or none when the rows are already there.
std::vector<Step> GatherSteps(RowForm from, RowForm to, BatchVariant v, const Topology& t) {
  std::vector<Step> steps;
  AppendGather(from, to, v, t, &steps);
  return steps;
}

// Whether a consumer whose read has `caps` reads after the gather that
// brings its rows from `r` to `compute`: a read declared after the
// attention-DP gather, or a read of every row on a residual kept on slices.
bool ReadsAfterGather(const ReadoutCaps& caps, RowForm r, RowForm compute, const Topology& t) {
  if (r == compute) return false;
  if (!caps.reads_before_dp_gather && compute == RowForm::kFfnRows && t.attn_dp > 1) return true;
  return caps.reads_after_attn_tp_gather && r == RowForm::kAttnTpSlice && t.attn_tp() > 1;
}

EntryPath EntryFor(const IncomingForm& in, Consumer consumer, const ReadoutCaps& caps, BatchVariant v,
                   const Topology& t, bool fusable) {
  EntryPath path;
  path.incoming = in;
  RowForm r = in.state == StreamState::kInitial ? in.rows : in.residual;
  // A sequence-parallel stack takes its input on the DP rows and scatters it:
  // each rank keeps its own slice (a local narrow) from the first stage on.
  const bool scatter_input =
      in.state == StreamState::kInitial && v == BatchVariant::kSequenceParallel && r == RowForm::kDpRows;
  if (scatter_input) {
    path.steps.push_back(Step{StepOp::kInitResidual});
    path.steps.push_back(Step{StepOp::kSliceResidual, CommGroup::kNone, RowForm::kDpRows, RowForm::kAttnTpSlice});
    r = RowForm::kAttnTpSlice;
  }
  // A context-parallel stack takes its input, or a pipeline handoff, on the
  // DP rows and keeps this rank's CP rows (a local row gather).
  const bool cp = v == BatchVariant::kContextParallel;
  const bool take_input = cp && in.state == StreamState::kInitial && r == RowForm::kDpRows;
  if (cp && r == RowForm::kDpRows) {
    if (take_input) path.steps.push_back(Step{StepOp::kInitResidual});
    path.steps.push_back(Step{StepOp::kSliceResidual, CommGroup::kNone, RowForm::kDpRows, RowForm::kCpRows});
    r = RowForm::kCpRows;
  }
  if (in.state == StreamState::kPending && in.rows == RowForm::kAttnTpSlice && r == RowForm::kDpRows) {
    path.steps.push_back(Step{StepOp::kSliceResidual, CommGroup::kNone, RowForm::kDpRows, RowForm::kAttnTpSlice});
    r = RowForm::kAttnTpSlice;
  }
  RowForm compute = r;
  if (consumer == Consumer::kFfn) compute = RowForm::kFfnRows;
  if (consumer == Consumer::kAttnGathering || consumer == Consumer::kFinalRead) compute = RowForm::kDpRows;
  // A CP batch's attention computes its own rows (against the whole context).
  if (cp && consumer != Consumer::kFfn && consumer != Consumer::kFinalRead) compute = RowForm::kCpRows;
  const std::vector<Step> gather = GatherSteps(r, compute, v, t);
  const bool read_after = !gather.empty() && ReadsAfterGather(caps, r, compute, t);
  switch (in.state) {
    case StreamState::kInitial:
      if (!scatter_input && !take_input) path.steps.push_back(Step{StepOp::kInitResidual});
      if (!read_after) path.steps.push_back(Step{StepOp::kRead});
      break;
    case StreamState::kWritten:
      if (!read_after) path.steps.push_back(Step{StepOp::kRead});
      break;
    case StreamState::kPending: {
      std::vector<Step> done = CompletionSteps(in.rows, in.owed, r, v, t);
      if (read_after) {
        // The update runs on the residual's own rows; the read waits for the gather.
        path.steps.insert(path.steps.end(), done.begin(), done.end());
        path.steps.push_back(Step{StepOp::kApplyUpdate});
      } else if (fusable && done.size() == 1 && done[0].op == StepOp::kAllReduce) {
        path.steps.push_back(Step{StepOp::kFusedInput, done[0].group, r, r});
      } else {
        path.steps.insert(path.steps.end(), done.begin(), done.end());
        path.steps.push_back(Step{StepOp::kUpdateAndRead});
      }
      break;
    }
  }
  if (read_after) {
    for (Step s : gather) {
      s.op = StepOp::kGatherResidual;
      path.steps.push_back(s);
    }
    path.steps.push_back(Step{StepOp::kReadGathered, CommGroup::kNone, compute, compute});
  } else if (!gather.empty() && caps.gathering_reads && gather[0].group == CommGroup::kAttnTp &&
             compute == RowForm::kDpRows &&
             (path.steps.back().op == StepOp::kRead || path.steps.back().op == StepOp::kUpdateAndRead)) {
    // The read on the slice and the gather onto the DP rows as one step.
    Step& last = path.steps.back();
    last = Step{last.op == StepOp::kRead ? StepOp::kReadGather : StepOp::kUpdateReadGather, CommGroup::kAttnTp, r,
                compute};
  } else {
    path.steps.insert(path.steps.end(), gather.begin(), gather.end());
  }
  path.residual_after = r;
  path.compute_rows = compute;
  return path;
}

// What the exit options for one residual form `r` are built from.
struct ExitContext {
  const StageDeclaration& stage;
  const NeighbourFacts& consumer;
  BatchVariant v;
  const Topology& t;
  ReductionPolicy policy;
  SumGroup owed;                 // the sum the stage's output still owes
  RowForm attn_rows;             // the rows an attention's output is on: its compute rows
  bool consumer_reads_all_rows;  // a read that needs every row of the attention's takes them back
  RowForm r;                     // the residual's form

  IncomingForm Pending(RowForm rows, SumGroup s) const { return IncomingForm{StreamState::kPending, rows, s, r}; }
  // Complete the sum now (an all-reduce from `rows`) and leave it pending the update.
  void CompleteNow(RowForm rows, ExitPath& exit) const {
    exit.options.push_back(ExitOption{ExitChoice::kCompleteAllReduce, r, CompletionSteps(rows, owed, r, v, t),
                                      Pending(r, SumGroup::kNone)});
  }
};

// An always-partial attention leaves its sum to the next input, the final
// read included; a mixer leaves it only to a consumer that takes it.
void AttentionExit(const ExitContext& c, ExitPath& exit) {
  const bool leave = !c.stage.is_mixer() || (!exit.facts.terminal && (c.consumer.declaration.kind == StageKind::kFfn ||
                                                                       c.t.attn_dp == 1));
  exit.facts.may_leave_to_next_input = leave && c.owed != SumGroup::kNone;
  if (leave) {
    exit.options.push_back(ExitOption{c.stage.is_mixer() ? ExitChoice::kLeaveToNextInput : ExitChoice::kRegisterPartial,
                                      c.r, {}, c.Pending(c.attn_rows, c.owed)});
  } else {
    c.CompleteNow(c.attn_rows, exit);
  }
}

// FFN of a CP batch: its rows are every row in natural order. The sum
// completes at the exit onto this rank's CP rows (a reduce-scatter with the
// CP mapping where the TP group is the CP group, adding the residual on the
// rank holding each row first; else an all-reduce and a take), or is left
// to the next input.
void ContextParallelFfnExit(const ExitContext& c, ExitPath& exit) {
  exit.facts.may_leave_to_next_input = !exit.facts.terminal && c.owed != SumGroup::kNone;
  if (c.stage.defers_only_with_provider) {
    exit.facts.leave_needs_provider = true;
    exit.facts.may_leave_to_next_input &= c.owed == SumGroup::kTp;
  }
  const bool cp_rs = c.owed != SumGroup::kNone && c.t.attn_tp() == 1 && c.t.attn_dp == 1 &&
                     (AllowsFixedRs(c.policy) || AllowsRsv(c.policy)) && c.stage.update->caps().plain_add &&
                     !c.stage.merges_branch && !c.consumer_reads_all_rows;
  if (cp_rs) {
    ExitOption o{ExitChoice::kReduceScatterCp, c.r, {},
                 IncomingForm{StreamState::kWritten, RowForm::kCpRows, SumGroup::kNone, RowForm::kCpRows}};
    o.steps.push_back(Step{StepOp::kAddBeforeSum, CommGroup::kNone, c.r, RowForm::kFfnRows});
    o.steps.push_back(Step{StepOp::kReduceScatterV, CommGroup::kTp, RowForm::kFfnRows, RowForm::kCpRows});
    o.steps.push_back(Step{StepOp::kWriteResidual});
    exit.options.push_back(o);
  }
  if (exit.facts.may_leave_to_next_input) {
    exit.options.push_back(ExitOption{ExitChoice::kLeaveToNextInput, c.r, {}, c.Pending(RowForm::kFfnRows, c.owed)});
  }
  c.CompleteNow(RowForm::kFfnRows, exit);
}

// A reduce-scatter exit of an FFN onto the attention-TP slice: the residual
// added first and written (plain updates), else left pending on the slice.
void ScatterExit(const ExitContext& c, ExitChoice choice, StepOp op, ExitPath& exit) {
  ExitOption o{choice, c.r, {}, IncomingForm{StreamState::kWritten, RowForm::kAttnTpSlice, SumGroup::kNone,
                                             RowForm::kAttnTpSlice}};
  const bool plain = c.stage.update->caps().plain_add;
  if (plain) o.steps.push_back(Step{StepOp::kAddBeforeSum, CommGroup::kNone, c.r, RowForm::kFfnRows});
  o.steps.push_back(Step{op, CommGroup::kTp, RowForm::kFfnRows, RowForm::kAttnTpSlice});
  if (plain) {
    o.steps.push_back(Step{StepOp::kWriteResidual});
  } else {
    o.leaves = c.Pending(RowForm::kAttnTpSlice, SumGroup::kNone);
  }
  exit.options.push_back(o);
}

// FFN. Under sequence parallelism every FFN sum completes at its exit with a
// reduce-scatter onto the slice whatever the policy (the policy only adds
// the variable attention-DP one, tried first); nothing is left to the next
// input, so an SP batch issues no all-reduce.
void FfnExit(const ExitContext& c, ExitPath& exit) {
  const bool sp = c.v == BatchVariant::kSequenceParallel;
  ExitFacts& f = exit.facts;
  f.fixed_rs_eligible = c.owed != SumGroup::kNone && Padded(c.v) && c.t.attn_cp == 1;
  f.rsv_eligible = c.owed != SumGroup::kNone && c.t.attn_dp > 1 && c.v != BatchVariant::kUnpadded;
  f.rsv_first = c.policy == ReductionPolicy::kRsRsv || (sp && AllowsRsv(c.policy));
  f.may_leave_to_next_input = !f.terminal && c.owed != SumGroup::kNone && !sp;
  if (c.stage.defers_only_with_provider) {
    // Only a sum over the TP group may wait, and only with the provider's consent.
    f.leave_needs_provider = true;
    f.may_leave_to_next_input &= c.owed == SumGroup::kTp;
  }
  // An output a branch is merged into stays a contribution until the merge.
  if (c.stage.merges_branch || c.consumer_reads_all_rows) f.rsv_eligible = f.fixed_rs_eligible = false;
  if (AllowsRsv(c.policy) && f.rsv_eligible) ScatterExit(c, ExitChoice::kReduceScatterV, StepOp::kReduceScatterV, exit);
  if ((AllowsFixedRs(c.policy) || sp) && f.fixed_rs_eligible) {
    ScatterExit(c, ExitChoice::kReduceScatterFixed, StepOp::kReduceScatter, exit);
  }
  if (f.may_leave_to_next_input) {
    exit.options.push_back(ExitOption{ExitChoice::kLeaveToNextInput, c.r, {}, c.Pending(RowForm::kFfnRows, c.owed)});
  }
  // A terminal MoE may hand its finalize to the final norm (chosen per batch
  // by its fusion provider, never by default).
  if (f.terminal && c.stage.sparse && !c.stage.output_complete) {
    exit.options.push_back(ExitOption{ExitChoice::kDeferFinalize, c.r, {}, c.Pending(RowForm::kFfnRows, c.owed)});
  }
  c.CompleteNow(RowForm::kFfnRows, exit);
}

// Exit options of `stage` followed by `consumer` (absent: terminal).
ExitPath ExitFor(const StageDeclaration& stage, const NeighbourFacts& consumer, BatchVariant v, const Topology& t,
                 ReductionPolicy policy) {
  ExitPath exit;
  exit.facts.terminal = !consumer.exists;
  const SumGroup owed = Effective(stage.owed_sum(), t);
  const bool consumer_reads_all_rows =
      (consumer.exists ? consumer.declaration.readout_caps : consumer.final_read).reads_after_attn_tp_gather;
  const bool cp = v == BatchVariant::kContextParallel;
  const RowForm attn_rows = cp ? RowForm::kCpRows : RowForm::kDpRows;
  for (RowForm r : ResidualForms(v, t, policy)) {
    const ExitContext c{stage, consumer, v, t, policy, owed, attn_rows, consumer_reads_all_rows, r};
    if (stage.update->caps().applied_at_exit) {
      // The producer applies its own update at its exit: complete now, update, written.
      ExitOption o{ExitChoice::kCompleteAllReduce, r,
                   CompletionSteps(stage.kind == StageKind::kFfn ? RowForm::kFfnRows : attn_rows, owed, r, v, t),
                   IncomingForm{StreamState::kWritten, r, SumGroup::kNone, r}};
      o.steps.push_back(Step{StepOp::kApplyUpdate});
      exit.options.push_back(o);
    } else if (stage.kind == StageKind::kAttention) {
      AttentionExit(c, exit);
    } else if (cp) {
      ContextParallelFfnExit(c, exit);
    } else {
      FfnExit(c, exit);
    }
  }
  return exit;
}

void AddEntry(EntryPath path, std::vector<EntryPath>* entries) {
  for (const EntryPath& e : *entries) {
    if (e.incoming == path.incoming) return;
  }
  entries->push_back(std::move(path));
}

}  // namespace

std::vector<Step> CompletionSteps(RowForm rows, SumGroup owed, RowForm target, BatchVariant v, const Topology& t) {
  std::vector<Step> steps;
  owed = Effective(owed, t);
  // With one DP group the FFN rows are the DP rows.
  if (rows == RowForm::kFfnRows && t.attn_dp == 1) rows = RowForm::kDpRows;
  if (owed == SumGroup::kNone) {
    if (rows != target) {
      SEAM_CHECK_MSG(rows != RowForm::kAttnTpSlice && rows != RowForm::kCpRows, "a slice cannot return to ",
                     RowFormName(target));
      steps.push_back(Step{StepOp::kTakeRows, CommGroup::kNone, rows, target});
    }
    return steps;
  }
  const CommGroup g = GroupCompleting(owed);
  SEAM_CHECK_MSG(rows != RowForm::kAttnTpSlice, "a slice cannot owe a sum");
  SEAM_CHECK_MSG(rows != RowForm::kCpRows || target == RowForm::kCpRows, "CP rows complete onto CP rows only");
  if (target == RowForm::kDpRows || target == RowForm::kCpRows) {
    steps.push_back(Step{StepOp::kAllReduce, g, rows, rows});
    if (rows != target) steps.push_back(Step{StepOp::kTakeRows, CommGroup::kNone, rows, target});
    return steps;
  }
  SEAM_CHECK_MSG(target == RowForm::kAttnTpSlice, "cannot complete onto ", RowFormName(target));
  steps.push_back(Step{Padded(v) ? StepOp::kReduceScatter : StepOp::kReduceScatterV, g, rows, target});
  return steps;
}

EntryPath BuildEntryPath(const IncomingForm& incoming, RowForm compute_rows, BatchVariant variant,
                         const Topology& topology, bool fusable, const ReadoutCaps& caps) {
  const Consumer c = compute_rows == RowForm::kFfnRows ? Consumer::kFfn
                     : compute_rows == RowForm::kDpRows ? Consumer::kFinalRead
                                                         : Consumer::kAttnLocal;
  return EntryFor(incoming, c, caps, variant, topology, fusable);
}

absl::StatusOr<StagePlan> BuildStagePlan(const StageDeclaration& stage, const NeighbourFacts& producer,
                                         const NeighbourFacts& consumer, const Topology& topology,
                                         ReductionPolicy policy) {
  if (policy == ReductionPolicy::kAuto) {
    return absl::InvalidArgumentError("reduction policy 'auto' must be resolved before the model is built");
  }
  if (stage.kind == StageKind::kAttention && !stage.gathers_attn_tp_input &&
      stage.readout_caps.reads_after_attn_tp_gather) {
    return absl::InvalidArgumentError(
        "an attention stage that does not gather its attention-TP input cannot declare a read after that gather");
  }
  if (stage.kind == StageKind::kFfn && stage.readout_caps.reads_after_attn_tp_gather) {
    return absl::InvalidArgumentError("reads_after_attn_tp_gather is a read of an attention stage or a final read");
  }
  if (stage.kind == StageKind::kFfn && stage.reduction != ProducerReduction::kExitScoped) {
    return absl::InvalidArgumentError("an ffn stage must be EXIT_SCOPED; ALWAYS_PARTIAL is for attention only");
  }
  StagePlan plan;
  plan.declaration = stage;
  plan.topology = topology;
  plan.policy = policy;
  plan.producer = producer;
  const Consumer me = ConsumerOf(stage);
  const ReadoutCaps& caps = stage.readout_caps;
  for (BatchVariant v : kServedVariants) {
    // UNPADDED serves batches whose rows do not divide over attention TP, and
    // only without attention DP. SEQUENCE_PARALLEL takes its stack input on
    // the DP rows (its entry scatters it); INPUT_SCATTERED on the slice.
    if (v == BatchVariant::kUnpadded && topology.attn_dp > 1) continue;
    // CONTEXT_PARALLEL is served without attention DP; with CP ranks the
    // scattered variants are not (their slices would repeat over CP ranks).
    if (v == BatchVariant::kContextParallel && topology.attn_dp > 1) continue;
    if ((v == BatchVariant::kInputScattered || v == BatchVariant::kSequenceParallel) && topology.attn_cp > 1) continue;
    VariantPaths vp;
    vp.variant = v;
    const std::vector<RowForm> forms = ResidualForms(v, topology, policy);
    if (!producer.exists) {
      const RowForm input = v == BatchVariant::kInputScattered ? RowForm::kAttnTpSlice : RowForm::kDpRows;
      AddEntry(EntryFor(IncomingForm{StreamState::kInitial, input}, me, caps, v, topology, false), &vp.entries);
    } else {
      NeighbourFacts self{true, stage};
      ExitPath before = ExitFor(producer.declaration, self, v, topology, policy);
      // Fused all-reduce + add + norm needs a plain add into an add+norm read;
      // any other update is applied only after its sum completes.
      const bool fusable = producer.declaration.update->caps().plain_add &&
                           (stage.readout_caps.add_norm || stage.readout_caps.completing_fusions);
      for (const ExitOption& o : before.options) {
        AddEntry(EntryFor(o.leaves, me, caps, v, topology, fusable), &vp.entries);
      }
      // CompleteOutput / AddToOutput complete the producer's sum onto the
      // residual's rows and leave only the update pending.
      for (RowForm r : forms) {
        AddEntry(EntryFor(IncomingForm{StreamState::kPending, r, SumGroup::kNone, r}, me, caps, v, topology, false),
                 &vp.entries);
      }
    }
    // A stream whose producer already completed and wrote it (a pipeline import
    // or a model that wrote the residual itself) enters on the written path.
    for (RowForm r : forms) {
      AddEntry(EntryFor(IncomingForm{StreamState::kWritten, r, SumGroup::kNone, r}, me, caps, v, topology, false),
               &vp.entries);
    }
    // A CP batch's pipeline handoff arrives on the DP rows (written or pending).
    if (v == BatchVariant::kContextParallel && producer.exists) {
      for (StreamState s : {StreamState::kWritten, StreamState::kPending}) {
        const IncomingForm in{s, RowForm::kDpRows, SumGroup::kNone, RowForm::kDpRows};
        AddEntry(EntryFor(in, me, caps, v, topology, false), &vp.entries);
      }
    }
    vp.exit = ExitFor(stage, consumer, v, topology, policy);
    if (!consumer.exists) vp.final_read = BuildFinalReadEntries(v, topology, stage, policy, consumer.final_read);
    plan.variants.push_back(std::move(vp));
  }
  return plan;
}

std::vector<EntryPath> BuildFinalReadEntries(BatchVariant variant, const Topology& topology,
                                             const StageDeclaration& last, ReductionPolicy policy,
                                             const ReadoutCaps& final_read) {
  std::vector<EntryPath> entries;
  NeighbourFacts none;
  none.final_read = final_read;
  ExitPath exit = ExitFor(last, none, variant, topology, policy);
  const bool fusable = last.update->caps().plain_add;
  auto add = [&](const IncomingForm& in, bool fuse) {
    AddEntry(EntryFor(in, Consumer::kFinalRead, final_read, variant, topology, fuse), &entries);
  };
  for (const ExitOption& o : exit.options) add(o.leaves, fusable);
  for (RowForm r : ResidualForms(variant, topology, policy)) {  // completed by CompleteOutput / AddToOutput
    add(IncomingForm{StreamState::kPending, r, SumGroup::kNone, r}, false);
  }
  for (RowForm r : ResidualForms(variant, topology, policy)) {
    add(IncomingForm{StreamState::kWritten, r, SumGroup::kNone, r}, false);
  }
  return entries;
}

}  // namespace seam::boundary
