#include "seam/boundary/branch.h"

#include "absl/strings/str_cat.h"
#include "path_executor.h"
#include "seam/boundary/boundary_errors.h"
#include "seam/boundary/plan.h"
#include "seam/core/status.h"
#include "seam/kernels/ops.h"
#include "stream_access.h"

namespace seam::boundary {
namespace {

bool Served(BatchVariant v) { return v == BatchVariant::kOrdinary || v == BatchVariant::kUnpadded; }

RowForm ComputeRows(const StageDeclaration& d) {
  return d.kind == StageKind::kFfn ? RowForm::kFfnRows : RowForm::kDpRows;
}

// Moves a tensor between DP rows and FFN rows (a gather over attention DP, or
// this rank's DP rows taken out of the FFN rows).
absl::StatusOr<Tensor> MoveRows(const Tensor& t, RowForm from, RowForm to, ForwardBatch& batch) {
  const Topology& topo = batch.rows.topology();
  if (from == to || topo.attn_dp == 1) return t;
  PathWork w;
  StepContext ctx{&batch, &batch.comms, nullptr, nullptr};
  if (from == RowForm::kFfnRows) {
    w.c = t;
    w.c_form = from;
    SEAM_RETURN_IF_ERROR(RunSteps({Step{StepOp::kTakeRows, CommGroup::kNone, from, to}}, ctx, &w));
    return w.c;
  }
  w.x = t;
  w.x_form = from;
  const StepOp op = batch.rows.padded() ? StepOp::kGather : StepOp::kGatherV;
  SEAM_RETURN_IF_ERROR(RunSteps({Step{op, CommGroup::kAttnDp, from, to}}, ctx, &w));
  return w.x;
}

// A residual on this rank's slice, gathered back onto its DP rows.
absl::StatusOr<Tensor> ToDpRows(const Tensor& t, RowForm form, ForwardBatch& batch) {
  if (form == RowForm::kDpRows || batch.rows.topology().attn_tp() == 1) return t;
  PathWork w;
  w.x = t;
  w.x_form = form;
  const StepOp op = batch.rows.padded() ? StepOp::kGather : StepOp::kGatherV;
  SEAM_RETURN_IF_ERROR(RunSteps({Step{op, CommGroup::kAttnTp, form, RowForm::kDpRows}},
                                StepContext{&batch, &batch.comms, nullptr, nullptr}, &w));
  return w.x;
}

}  // namespace

absl::StatusOr<std::vector<std::shared_ptr<StageBoundary>>> AppendBranchAt(const char* file, int line,
                                                                           int global_layer,
                                                                           const StageBoundary& source,
                                                                           std::vector<StageItem> items,
                                                                           BranchOptions options) {
  LayerStack* stack = LayerStack::Current();
  if (stack == nullptr) return errors::AppendWithoutStack();
  for (BatchVariant v : options.variants) {
    if (!Served(v)) return errors::BranchVariantRefused(BatchVariantName(v));
  }
  if (items.empty()) return absl::InvalidArgumentError("a branch needs at least one stage");
  if (!source.declaration().merges_branch) {
    return absl::InvalidArgumentError(
        "a branch's source must be declared with merges_branch: its output takes the branch's back");
  }
  const std::string where = absl::StrCat(file, ":", line, ", branch prepared from a ",
                                         StageKindName(source.declaration().kind), " stage");
  std::vector<std::shared_ptr<StageBoundary>> out;
  for (StageItem& item : items) {
    if (item.declaration.place.bound) return errors::DeclarationAlreadyBound(item.declaration.place.source);
    SEAM_RETURN_IF_ERROR(ValidateOptions(item.declaration.kind, item.options));
    if (!item.declaration.update->caps().plain_add) {
      return absl::InvalidArgumentError(absl::StrCat("a branch stage needs a plain update (", where, ")"));
    }
    out.push_back(std::make_shared<StageBoundary>(item.declaration, item.norm, item.options, item.read));
  }
  // Branches complete with all-reduces on ordinary rows: their plans use the
  // all-reduce policy, whatever the stack's.
  const Topology& topology = stack->options().topology;
  for (size_t i = 0; i < out.size(); ++i) {
    NeighbourFacts producer, consumer;
    if (i > 0) producer = NeighbourFacts{true, out[i - 1]->declaration()};
    if (i + 1 < out.size()) consumer = NeighbourFacts{true, out[i + 1]->declaration()};
    auto plan = BuildStagePlan(out[i]->declaration(), producer, consumer, topology, ReductionPolicy::kAr);
    if (!plan.ok()) {
      return absl::Status(plan.status().code(), absl::StrCat(plan.status().message(), " [", where, "]"));
    }
    std::vector<VariantPaths> kept;
    for (VariantPaths& vp : plan->variants) {
      for (BatchVariant v : options.variants) {
        if (vp.variant == v) kept.push_back(std::move(vp));
      }
    }
    plan->variants = std::move(kept);
    StagePlace place;
    place.bound = true;
    place.global_layer = global_layer;
    place.has_producer = producer.exists;
    // The first stage's producer kind names the source (whose input it takes).
    place.producer_kind = producer.exists ? producer.declaration.kind : source.declaration().kind;
    place.consumer_is_mixer = consumer.exists && consumer.declaration.is_mixer();
    place.source = absl::StrCat(where, ", stage ", i + 1);
    place.branch = true;
    place.prepared_entry = i == 0;
    out[i]->Bind(std::make_unique<StagePlan>(*std::move(plan)), place);
  }
  return out;
}

absl::StatusOr<BranchFork> BranchInput(const StageBoundary& first, const Tensor& source_input, ForwardBatch& batch) {
  if (!first.bound() || !first.declaration().place.prepared_entry) {
    return absl::FailedPreconditionError("branch_input enters the first stage of a prepared branch only");
  }
  if (!Served(batch.variant)) return errors::NoPathForVariant(BatchVariantName(batch.variant));
  if (batch.stream == nullptr) return errors::StreamNotStarted();
  const ResidualStream& main = *batch.stream;
  if (main.state() != StreamState::kWritten) {
    return absl::FailedPreconditionError("branch_input forks the stream the source's prepare wrote; it is " +
                                         std::string(StreamStateName(main.state())));
  }
  // The source prepared for an FFN (FFN rows) or an attention (DP rows).
  const RowForm from = first.declaration().place.producer_kind == StageKind::kFfn ? RowForm::kFfnRows : RowForm::kDpRows;
  if (source_input.rows() != batch.rows.RowsOf(from)) {
    return absl::InvalidArgumentError(absl::StrCat("the source's input has ", source_input.rows(), " rows; its ",
                                                   RowFormName(from), " hold ", batch.rows.RowsOf(from)));
  }
  const RowForm to = ComputeRows(first.declaration());
  BranchFork fork{ForwardBatch(batch.microbatch_id, batch.variant, batch.rows.topology(), batch.rows.dp_rows()),
                  Tensor()};
  fork.batch.comms = batch.comms;
  fork.batch.rsv_usable = batch.rsv_usable;
  SEAM_ASSIGN_OR_RETURN(fork.input, MoveRows(source_input, from, to, batch));
  // The branch writes its own residual: a copy on the DP rows.
  SEAM_ASSIGN_OR_RETURN(Tensor residual, ToDpRows(main.residual(), main.residual_form(), batch));
  fork.batch.stream = std::make_unique<ResidualStream>(batch.microbatch_id);
  fork.batch.stream->Write(residual.Clone(), RowForm::kDpRows);
  fork.batch.stream->Issue(fork.input, false);
  return fork;
}

absl::StatusOr<BranchResult> BranchOutput(const Hidden& hidden, ForwardBatch& branch_batch) {
  if (branch_batch.stream == nullptr) return errors::StreamNotStarted();
  SEAM_RETURN_IF_ERROR(branch_batch.stream->CheckIdentity(hidden));
  const Contribution* pending = branch_batch.stream->pending();
  if (pending == nullptr) return absl::FailedPreconditionError("branch_output needs the branch's pending output");
  SEAM_ASSIGN_OR_RETURN(ResidualStream * stream, AcceptValue(branch_batch, hidden));
  PathWork work = WorkFrom(*stream, hidden);
  SEAM_RETURN_IF_ERROR(CompleteInto(branch_batch, &work));
  BranchResult out{work.r, work.c, work.r_form};
  branch_batch.stream.reset();
  return out;
}

absl::StatusOr<Hidden> MergeBranch(const Hidden& hidden, ForwardBatch& batch, const BranchResult& branch) {
  if (batch.stream == nullptr) return errors::StreamNotStarted();
  SEAM_RETURN_IF_ERROR(batch.stream->CheckIdentity(hidden));
  const Contribution* pending = batch.stream->pending();
  if (pending == nullptr) return absl::FailedPreconditionError("merge_branch needs the source's pending output");
  if (!pending->update->caps().plain_add) {
    return absl::FailedPreconditionError(
        absl::StrCat("merge_branch adds outputs: the source's ", pending->update->name(), " update is not a plain add"));
  }
  SEAM_ASSIGN_OR_RETURN(ResidualStream * stream, AcceptValue(batch, hidden));
  SEAM_RETURN_IF_ERROR(ResolveDeferred(*stream));
  PathWork work = WorkFrom(*stream, hidden);
  SEAM_RETURN_IF_ERROR(CompleteInto(batch, &work));
  // The branch's rows onto the main residual's (its slice: a local narrow).
  Tensor residual = branch.residual, extra = branch.contribution;
  if (work.r_form == RowForm::kAttnTpSlice && branch.rows == RowForm::kDpRows) {
    residual = residual.Rows(batch.rows.my_slice_begin(), batch.rows.my_slice_rows());
    extra = extra.Rows(batch.rows.my_slice_begin(), batch.rows.my_slice_rows());
  } else if (work.r_form != branch.rows) {
    return absl::InternalError(absl::StrCat("branch output on ", RowFormName(branch.rows), "; the stream's residual on ",
                                            RowFormName(work.r_form)));
  }
  Tensor sum = work.c.Clone();
  SEAM_RETURN_IF_ERROR(kernels::AddInPlace(sum, extra));
  const std::shared_ptr<const ResidualUpdate> update = stream->pending()->update;
  stream->Write(residual.Clone(), work.r_form);
  stream->Record(Contribution{sum, work.r_form, SumGroup::kNone, update});
  return stream->Issue(sum, false);
}

}  // namespace seam::boundary
