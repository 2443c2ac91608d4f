#include "seam/boundary/stage_boundary.h"

#include "absl/strings/str_cat.h"
#include "path_executor.h"
#include "seam/boundary/deferred_finalize.h"
#include "seam/boundary/output_transform.h"
#include "seam/boundary/boundary_errors.h"
#include "seam/core/status.h"
#include "stream_access.h"

namespace seam::boundary {
namespace {

// An FFN of an operation-scheduled microbatch completes with CompleteNow.
absl::Status RefuseOperationScheduled(const StageDeclaration& d, const ForwardBatch& batch, const char* call) {
  if (!batch.operation_scheduled || d.kind != StageKind::kFfn) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      call, " on the FFN of an operation-scheduled microbatch (two-batch overlap): its sum completes with ",
      "CompleteNow, never deferred or handed on (", d.place.source, ")"));
}

}  // namespace

StageBoundary::StageBoundary(StageDeclaration declaration, const NormParams* norm, StageOptions options,
                             std::shared_ptr<const ResidualReadout> read)
    : declaration_(std::move(declaration)),
      norm_(norm),
      options_(std::move(options)),
      read_(read != nullptr ? std::move(read) : std::make_shared<AddRmsNormRead>(norm)) {}

StageBoundary::~StageBoundary() = default;

const StagePlan& StageBoundary::plan() const {
  SEAM_CHECK_MSG(plan_ != nullptr, "stage boundary used before its layer stack bound it");
  return *plan_;
}

void StageBoundary::Bind(std::unique_ptr<StagePlan> plan, StagePlace place) {
  declaration_.place = place;
  plan->declaration.place = place;
  plan_ = std::move(plan);
  if (options_.fusions) {
    fusions_ = declaration_.kind == StageKind::kFfn ? options_.fusions->FfnInputFusions(*plan_)
                                                    : options_.fusions->AttnInputFusions(*plan_);
  }
}

absl::StatusOr<const VariantPaths*> StageBoundary::Paths(const ForwardBatch& batch) const {
  if (plan_ == nullptr) {
    return absl::FailedPreconditionError("stage boundary used before its layer stack bound it (close the stack)");
  }
  const VariantPaths* vp = plan_->Find(batch.variant);
  if (vp == nullptr) return errors::NoPathForVariant(BatchVariantName(batch.variant));
  return vp;
}

absl::StatusOr<Tensor> StageBoundary::Prepare(const Hidden& hidden, ForwardBatch& batch,
                                              const PrepareCapture& capture) {
  if (declaration_.place.prepared_entry) return errors::PreparedBranchEnteredThroughPrepare();
  if (capture.any() && declaration_.kind == StageKind::kFfn) return errors::FfnPrepareTakesNoCapture();
  SEAM_ASSIGN_OR_RETURN(ResidualStream * stream, AcceptValue(batch, hidden));
  SEAM_RETURN_IF_ERROR(ResolveDeferred(*stream));
  SEAM_ASSIGN_OR_RETURN(const VariantPaths* vp, Paths(batch));
  const IncomingForm in = IncomingOf(*stream);
  const EntryPath* path = vp->FindEntry(in);
  if (path == nullptr) {
    return absl::InternalError(absl::StrCat("stage ", declaration_.place.source, " has no entry path for ",
                                            in.ToString(), " in a ", BatchVariantName(batch.variant), " batch"));
  }
  // A capture completes the owed sum unfused (no fusion candidates).
  StepContext ctx{&batch, &batch.comms, read_.get(), capture.any() ? nullptr : &fusions_};
  PathWork work = WorkFrom(*stream, hidden);
  if (capture.capture && in.state == StreamState::kInitial) capture.capture(work.c, false);  // before init_residual
  SEAM_RETURN_IF_ERROR(RunSteps(path->steps, ctx, &work));
  stream->Write(work.r, work.r_form);
  if (capture.capture && in.state != StreamState::kInitial) capture.capture(work.r, false);
  if (capture.capture_gathered) {
    // The residual moved as the input was: the path's gathers, on a new buffer.
    PathWork moved;
    moved.x = work.r;
    moved.x_form = work.r_form;
    bool gathered = false;
    for (const Step& s : path->steps) {
      const bool moves = s.op == StepOp::kGather || s.op == StepOp::kGatherV || s.op == StepOp::kReadGather ||
                         s.op == StepOp::kUpdateReadGather || s.op == StepOp::kGatherResidual;
      if (!moves) continue;
      const Step gather{batch.rows.padded() ? StepOp::kGather : StepOp::kGatherV, s.group, s.from, s.to};
      SEAM_RETURN_IF_ERROR(RunSteps({gather}, StepContext{&batch, &batch.comms, nullptr, nullptr}, &moved));
      gathered = true;
    }
    capture.capture_gathered(moved.x, gathered);
  }
  return work.x;
}

absl::StatusOr<const ExitOption*> StageBoundary::ChooseExit(const ForwardBatch& batch) const {
  SEAM_ASSIGN_OR_RETURN(const VariantPaths* vp, Paths(batch));
  const RowForm r = batch.stream->residual_form();
  for (const ExitOption& o : vp->exit.options) {
    if (o.residual != r) continue;
    if (o.choice == ExitChoice::kReduceScatterV && !batch.rsv_usable) continue;
    if (o.choice == ExitChoice::kDeferFinalize) continue;  // taken only by an exit scope's handoff
    if (o.choice == ExitChoice::kLeaveToNextInput && vp->exit.facts.leave_needs_provider &&
        !(has_fusions() && options_.fusions->CanDeferAllReduce(*plan_, batch))) {
      continue;
    }
    return &o;
  }
  return absl::InternalError(absl::StrCat("no exit option for a residual on ", RowFormName(r)));
}

absl::StatusOr<Hidden> StageBoundary::RunExit(const ExitOption& option, const Tensor& output, ForwardBatch& batch) {
  ResidualStream* stream = batch.stream.get();
  const RowForm out_rows = declaration_.kind == StageKind::kFfn                ? RowForm::kFfnRows
                           : batch.variant == BatchVariant::kContextParallel ? RowForm::kCpRows
                                                                             : RowForm::kDpRows;
  if (output.rows() != batch.rows.RowsOf(out_rows) && !declaration_.gathers_attn_tp_input &&
      output.rows() == batch.rows.RowsOf(RowForm::kAttnTpSlice)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a stage that does not gather its attention-TP input is handed its slice and returns its output on "
        "dp_rows (its compute gathers); the output has ",
        output.rows(), " rows, dp_rows ", batch.rows.RowsOf(out_rows)));
  }
  if (output.rows() != batch.rows.RowsOf(out_rows)) {
    return absl::InvalidArgumentError(absl::StrCat(StageKindName(declaration_.kind), " output has ", output.rows(),
                                                   " rows; this batch has ", batch.rows.RowsOf(out_rows),
                                                   " rows on ", RowFormName(out_rows)));
  }
  PathWork work;
  work.c = output;
  work.c_form = out_rows;
  work.owed = declaration_.owed_sum();
  work.r = stream->residual();
  work.r_form = stream->residual_form();
  work.update = declaration_.update;
  StepContext ctx{&batch, &batch.comms, nullptr, nullptr};
  SEAM_RETURN_IF_ERROR(RunSteps(option.steps, ctx, &work));
  batch.last_plan = plan_.get();
  if (work.wrote_residual) {
    stream->Write(work.r, work.r_form);
    return stream->Issue(work.r, false);
  }
  stream->Record(Contribution{work.c, option.leaves.rows, option.leaves.owed, declaration_.update});
  return stream->Issue(work.c, option.leaves.owed != SumGroup::kNone);
}

absl::StatusOr<Hidden> StageBoundary::Finish(const Tensor& output, ForwardBatch& batch) {
  if (batch.stream == nullptr) return errors::StreamNotStarted();
  SEAM_RETURN_IF_ERROR(RefuseOperationScheduled(declaration_, batch, "Finish()"));
  if (has_fusions() && declaration_.kind == StageKind::kFfn) return errors::FinishWithFusions();
  SEAM_ASSIGN_OR_RETURN(const ExitOption* option, ChooseExit(batch));
  return RunExit(*option, output, batch);
}

absl::StatusOr<std::unique_ptr<ExitScope>> StageBoundary::Exit(ForwardBatch& batch) {
  if (batch.stream == nullptr) return errors::StreamNotStarted();
  if (declaration_.kind != StageKind::kFfn) {
    return absl::FailedPreconditionError("Exit() is for ffn stages; an attention stage finishes with Finish()");
  }
  SEAM_RETURN_IF_ERROR(RefuseOperationScheduled(declaration_, batch, "Exit()"));
  SEAM_ASSIGN_OR_RETURN(const ExitOption* option, ChooseExit(batch));
  // The handoff option exists only at a terminal MoE; the provider decides per
  // batch. It replaces only an exit that all-reduces (or owes nothing, on one
  // rank), whose bytes the finalize service's one all-reduce moves again: a
  // scattering exit moves less and stays.
  const ExitOption* handoff = nullptr;
  SEAM_ASSIGN_OR_RETURN(const VariantPaths* vp, Paths(batch));
  for (const ExitOption& o : vp->exit.options) {
    if (o.choice == ExitChoice::kDeferFinalize && o.residual == batch.stream->residual_form()) handoff = &o;
  }
  const bool defer = handoff != nullptr && option->choice == ExitChoice::kCompleteAllReduce && has_fusions() &&
                     options_.fusions->CanDeferFinalize(*plan_, batch);
  auto scope = std::unique_ptr<ExitScope>(new ExitScope(this, &batch, option, defer));
  scope->handoff_option_ = handoff;
  return scope;
}

absl::StatusOr<Hidden> StageBoundary::CompleteNow(const Tensor& output, ForwardBatch& batch) {
  if (batch.stream == nullptr) return errors::StreamNotStarted();
  SEAM_ASSIGN_OR_RETURN(const VariantPaths* vp, Paths(batch));
  const RowForm r = batch.stream->residual_form();
  const ExitOption* complete = nullptr;
  for (const ExitOption& o : vp->exit.options) {
    if (o.residual == r && o.choice == ExitChoice::kCompleteAllReduce) complete = &o;
  }
  if (complete == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        "CompleteNow: ", declaration_.ToString(), " has no exit that completes its sum now (an always-partial ",
        "attention leaves it to the next input; use Finish()) at ", declaration_.place.source));
  }
  // The completing exit: the sum over the stage's group, then the rows back
  // to the residual's (under attention DP a local narrow of this DP group's
  // rows); an update applied at the exit is applied there, transform included.
  SEAM_ASSIGN_OR_RETURN(Hidden h, RunExit(*complete, output, batch));
  ResidualStream* stream = batch.stream.get();
  Contribution* pending = stream->pending();
  if (pending == nullptr) return h;  // written at the exit
  const TransformParts parts = UnwrapTransform(pending->update);
  if (parts.transform == nullptr) return h;
  // The output transform now, on the completed output; the plain update stays pending.
  Tensor transformed = pending->value.Clone();
  SEAM_RETURN_IF_ERROR(parts.transform->Apply(transformed));
  stream->Record(Contribution{transformed, pending->rows, SumGroup::kNone, parts.update});
  return stream->Issue(transformed, false);
}

ExitScope::ExitScope(StageBoundary* boundary, ForwardBatch* batch, const ExitOption* option, bool defer)
    : boundary_(boundary), batch_(batch), option_(option), defer_moe_finalize_(defer),
      previous_flag_(batch->defer_moe_finalize) {
  batch_->defer_moe_finalize = defer;
  ++batch_->open_exit_scopes;
}

ExitScope::~ExitScope() {
  batch_->defer_moe_finalize = previous_flag_;
  --batch_->open_exit_scopes;
}

absl::StatusOr<Hidden> ExitScope::FinishDeferred(std::shared_ptr<const DeferredFinalize> handoff) {
  if (finished_) return absl::FailedPreconditionError("exit scope already finished; Finish() runs once");
  if (!defer_moe_finalize_ || handoff_option_ == nullptr) return errors::HandoffWithoutDefer();
  if (handoff == nullptr) return absl::InvalidArgumentError("FinishDeferred needs a finalize handoff");
  const int64_t rows = batch_->rows.RowsOf(RowForm::kFfnRows);
  if (handoff->rows() != rows) {
    return absl::InvalidArgumentError(
        absl::StrCat("finalize handoff has ", handoff->rows(), " rows; this batch has ", rows, " on ffn_rows"));
  }
  finished_ = true;
  ResidualStream* stream = batch_->stream.get();
  const IncomingForm& leaves = handoff_option_->leaves;
  Contribution c{Tensor(), leaves.rows, leaves.owed, boundary_->declaration_.update};
  c.deferred = std::move(handoff);
  stream->Record(std::move(c));
  batch_->last_plan = boundary_->plan_.get();
  return stream->Issue(Tensor(), true);
}

absl::StatusOr<Hidden> ExitScope::Finish(const Tensor& output) {
  if (finished_) return absl::FailedPreconditionError("exit scope already finished; Finish() runs once");
  finished_ = true;
  return boundary_->RunExit(*option_, output, *batch_);
}

}  // namespace seam::boundary
