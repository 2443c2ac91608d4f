// One microbatch on one stage: order and content checks, frees, handoff in,
// compute, handoff out or sampling.
#include "microbatch_runner.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cached_blocks.h"
#include "request_checks.h"
#include "seam/core/logging.h"
#include "seam/core/status.h"
#include "seam/handoff/handoff_tag.h"
#include "seam/handoff/stray_drain.h"
#include "stage_handoff.h"

namespace seam::server {
namespace {

double SecondsSince(absl::Time start) { return absl::ToDoubleSeconds(absl::Now() - start); }

double TensorBytes(const std::vector<boundary::PipelineTensors>& handoffs) {
  size_t bytes = 0;
  for (const boundary::PipelineTensors& h : handoffs) {
    if (h.hidden.defined()) bytes += h.hidden.nbytes();
    if (h.residual.defined()) bytes += h.residual.nbytes();
  }
  return static_cast<double>(bytes);
}

}  // namespace

MicrobatchRunner::MicrobatchRunner(const v1::StageConfig& config, std::unique_ptr<runtime::StageGroup> group,
                                   handoff::UcxWorker& worker, handoff::UcxEndpoint previous,
                                   handoff::UcxEndpoint next, handoff::UcxEndpoint first,
                                   absl::Duration handoff_timeout, uint64_t max_handoff_payload_bytes,
                                   StageMetrics* metrics, const HandoffLinkOptions& links,
                                   const std::string& previous_key)
    : config_(config),
      group_(std::move(group)),
      worker_(worker),
      previous_(std::move(previous)),
      next_(std::move(next)),
      first_(std::move(first)),
      handoff_timeout_(handoff_timeout) {
  if (metrics != nullptr) {
    metrics_.emplace(metrics->ForRank(static_cast<int>(config_.pipeline_rank()), group_->tp()));
    const runtime::GraphDecodeStats stats = group_->GraphStats();
    for (const auto& [bucket, n] : stats.replays) graph_replays_seen_ += n;
    eager_steps_seen_ = stats.eager_steps;
  }
  // Only OpenSSL failing could make these fail; the links' own would then fail their first handoff.
  link_ = handoff::LinkTagOf(config_.handoff_key()).value_or(0);
  if (!previous_key.empty()) previous_link_ = handoff::LinkTagOf(previous_key).value_or(0);
  if (!group_->is_last_piece()) outgoing_ = std::make_unique<OutgoingLink>(worker_, next_, config_, links);
  handoff::HandoffReceiverOptions receive;
  receive.key = config_.handoff_key();
  receive.previous_key = previous_key;
  if (group_->is_first_piece()) {
    if (config_.pipeline_size() > 1) {
      // Tokens of multi-step decode: one int32 per sequence of a step.
      // (a step has at most a descriptor's sequences, far fewer than 2^18).
      receive.max_payload_bytes = uint64_t{1} << 20;
      token_receiver_ = std::make_unique<handoff::HandoffReceiver>(worker_, nullptr, receive);
    }
    return;
  }
  receive.page_locked = group_->on_gpu();
  receive.max_payload_bytes = max_handoff_payload_bytes;
  // One link for the runner's life: its drop counts accumulate.
  incoming_ = std::make_unique<IncomingLink>(worker_, previous_, config_, links, receive);
}

handoff::HandoffDrops MicrobatchRunner::drops() const {
  handoff::HandoffDrops d = incoming_ ? incoming_->drops() : handoff::HandoffDrops{};
  if (outgoing_) {
    const handoff::DeviceLinkDrops replies = outgoing_->drops();
    d.bad_mac += replies.bad_mac;
    d.malformed += replies.malformed;
    d.unexpected_microbatch += replies.stale;
  }
  if (token_receiver_) d += token_receiver_->drops();
  d += idle_drops_;
  return d;
}

uint64_t MicrobatchRunner::AnsweredThrough() const {
  // Members of a wave not yet whole are taken but unanswered (their handoffs cannot have come yet).
  return wave_.empty() ? last_sequence_number_ : wave_.front().sequence_number() - 1;
}

bool MicrobatchRunner::Poll() {
  const bool progressed = worker_.Progress();
  if (incoming_) {
    incoming_->Poll(AnsweredThrough());
  } else if (token_receiver_) {
    token_receiver_->Poll(AnsweredThrough());
  } else {
    handoff::DrainStrays(worker_, link_, previous_link_, idle_drops_);
  }
  return progressed;
}

void MicrobatchRunner::DrainForNewEpoch() {
  const size_t taken = handoff::DrainAll(worker_, link_, idle_drops_);
  if (taken > 0) SEAM_LOG_INFO("epoch {} ends: {} message(s) still on the data plane dropped", config_.epoch(), taken);
}

v1::HandoffTransport MicrobatchRunner::transport_in() const {
  return incoming_ ? incoming_->transport() : v1::HANDOFF_TRANSPORT_UNSPECIFIED;
}

v1::HandoffTransport MicrobatchRunner::transport_out() const {
  return outgoing_ ? outgoing_->transport() : v1::HANDOFF_TRANSPORT_UNSPECIFIED;
}

v1::MicrobatchResult MicrobatchRunner::Refuse(const v1::MicrobatchDescriptor& d, const absl::Status& why) const {
  v1::MicrobatchResult result;
  result.set_microbatch_id(d.microbatch_id());
  v1::StageError* e = result.mutable_error();
  e->set_code(static_cast<int>(why.code()));
  e->set_message(std::string(why.message()));
  e->set_pipeline_rank(config_.pipeline_rank());
  e->set_tp_rank(static_cast<uint32_t>(runtime::FailedTpRank(why).value_or(0)));
  return result;
}

std::vector<uint64_t> MicrobatchRunner::FreeBlocks() const {
  std::vector<uint64_t> free;
  for (int dp = 0; dp < group_->attn_dp(); ++dp) free.push_back(static_cast<uint64_t>(group_->FreeBlocks(dp)));
  return free;
}

void MicrobatchRunner::Run(const v1::MicrobatchDescriptor& d, absl::Time arrived, const Answer& answer) {
  // A step run ahead serves only the wave member that continues it.
  if (ahead_.has_value() && (d.decode_steps() <= 1 || !ContinuesAhead(d))) ahead_.reset();
  if (d.decode_steps() > 1) return TakeIntoWave(d, arrived, answer);
  if (!wave_.empty()) {  // never from a sound coordinator: the wave cannot become whole
    for (const v1::MicrobatchDescriptor& m : wave_) {
      AnswerError(m, absl::InvalidArgumentError(absl::StrCat("microbatch ", d.microbatch_id(),
                                                             " came before this wave was whole")), answer);
    }
    wave_.clear();
  }
  answer(Run(d, arrived));
}

v1::MicrobatchResult MicrobatchRunner::Run(const v1::MicrobatchDescriptor& d, absl::Time arrived) {
  v1::MicrobatchResult result;
  result.set_microbatch_id(d.microbatch_id());
  StartBudget(d, arrived);
  const absl::Time started = absl::Now();
  fed_dropped_.clear();
  absl::StatusOr<const v1::MicrobatchDescriptor*> taken = Take(d);
  absl::Status status = taken.status();
  if (status.ok() && (*taken)->sequences_size() > 0) status = Compute(**taken, 0, result);
  if (status.ok()) {
    if (WholePipeline()) fed_.Record(result);
    for (v1::SequenceResult& r : fed_dropped_) {
      r.mutable_error()->set_pipeline_rank(config_.pipeline_rank());
      *result.add_sequences() = std::move(r);
    }
  }
  // Where a step's time goes: in this stage, or between its answer and the
  // next descriptor (the coordinator's round trip and the other stages).
  const absl::Time done = absl::Now();
  SEAM_LOG_DEBUG("microbatch {}: {} sequences ({} fed the token chosen before), {} us in the stage, {} us since the "
                 "previous answer",
                 d.microbatch_id(), d.sequences_size(), fed_.filled(), absl::ToInt64Microseconds(done - started),
                 last_answer_ == absl::InfinitePast() ? -1 : absl::ToInt64Microseconds(started - last_answer_));
  last_answer_ = done;
  if (!status.ok()) {
    SEAM_LOG_WARN("microbatch {} (sequence {}): {}", d.microbatch_id(), d.sequence_number(), status.ToString());
    return Refuse(d, status);
  }
  return result;
}

absl::StatusOr<const v1::MicrobatchDescriptor*> MicrobatchRunner::Take(const v1::MicrobatchDescriptor& d) {
  // Out of order (another epoch, a replay, a jump ahead): refused with the
  // counter where it is, so the next real descriptor still runs.
  SEAM_RETURN_IF_ERROR(CheckDescriptorOrder(d, config_.epoch(), last_sequence_number_));
  // Every stage sees the same descriptor and takes the same decisions on it,
  // so from here on it counts as run, on the previous stage too.
  last_sequence_number_ = d.sequence_number();
  SEAM_RETURN_IF_ERROR(ApplyCachedBlockChanges(d, *group_));
  for (uint64_t id : d.finished_sequence_ids()) {
    sampler_.Forget(id);
    fed_.Forget(id);
    absl::Status freed = group_->Free(id);
    if (!freed.ok() && !absl::IsNotFound(freed)) {
      return Annotate(freed, absl::StrCat("finished_sequence_ids: freeing sequence ", id));
    }
  }
  SEAM_ASSIGN_OR_RETURN(const v1::MicrobatchDescriptor* run,
                        fed_.Fill(d, WholePipeline(), fed_storage_, fed_dropped_));
  if (run->sequences_size() == 0 && !fed_dropped_.empty()) return run;  // every entry left out
  SEAM_RETURN_IF_ERROR(CheckDescriptorContents(*run, group_->config().vocab_size));
  SEAM_RETURN_IF_ERROR(MapSharedBlocks(*run, *group_));
  if (group_->is_last_piece()) SEAM_RETURN_IF_ERROR(sampler_.Take(*run));
  return run;
}

absl::Status MicrobatchRunner::Compute(const v1::MicrobatchDescriptor& d, uint32_t step,
                                       v1::MicrobatchResult& result) {
  if (group_->is_first_piece()) SEAM_RETURN_IF_ERROR(CheckBudget(d, "before this stage ran it"));
  std::vector<models::SequenceStep> steps;
  for (const v1::SequenceEntry& s : d.sequences()) {
    steps.push_back(models::SequenceStep{s.sequence_id(), {s.token_ids().begin(), s.token_ids().end()},
                                         static_cast<int64_t>(s.position_start()), static_cast<int>(s.dp_group())});
  }
  std::vector<boundary::PipelineTensors> in;
  if (!group_->is_first_piece()) {
    const absl::Time wait = absl::Now();
    SEAM_ASSIGN_OR_RETURN(in, ReceiveHandoff(d, step));
    if (metrics_) {
      metrics_->handoff_receive.Observe(SecondsSince(wait));
      metrics_->handoff_bytes_received.Increment(TensorBytes(in));
    }
  }
  const bool all_logits = group_->is_last_piece() && SequenceSampler::NeedsAllLogits(d);
  // The last stage chooses tokens where the logits are, unless a sequence asks for log-probs.
  std::vector<runtime::TokenChoice> choices;
  const bool choose = group_->is_last_piece() && !all_logits;
  if (choose) choices = sampler_.Choices(d);
  const absl::Time step_start = absl::Now();
  SEAM_ASSIGN_OR_RETURN(runtime::PieceOutput out,
                        group_->StepPiece(steps, all_logits, in, choose ? &choices : nullptr));
  RecordStep(step_start, StepKindOf(d));
  if (!group_->is_last_piece()) {
    // A handoff past the budget is not sent: the next stage has given up on it.
    SEAM_RETURN_IF_ERROR(CheckBudget(d, "while this stage computed it"));
    SEAM_ASSIGN_OR_RETURN(OutgoingHandoff framed, FrameHandoff(d, config_, *group_, out.handoff));
    framed.header.set_decode_step(step);
    const absl::Time send_start = absl::Now();
    absl::Status sent = outgoing_->Send(framed, SendDeadline());
    if (!sent.ok()) return Annotate(sent, absl::StrCat("handoff to pipeline rank ", config_.pipeline_rank() + 1));
    if (metrics_) {
      metrics_->handoff_send.Observe(SecondsSince(send_start));
      metrics_->handoff_bytes_sent.Increment(TensorBytes(out.handoff));
    }
    return absl::OkStatus();  // the ack: an answer with no sequences
  }
  std::vector<v1::SequenceResult> sequences;
  if (choose) {
    sequences = sampler_.Results(d, out.tokens, out.logprobs);
  } else {
    SEAM_ASSIGN_OR_RETURN(sequences, sampler_.Sample(d, out.logits, all_logits));
  }
  for (v1::SequenceResult& s : sequences) *result.add_sequences() = std::move(s);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<boundary::PipelineTensors>> MicrobatchRunner::ReceiveHandoff(
    const v1::MicrobatchDescriptor& d, uint32_t step) {
  handoff::HandoffExpectation expect;
  expect.microbatch_id = d.microbatch_id();
  expect.sequence_number = d.sequence_number();
  expect.epoch = d.epoch();
  expect.validator = [&](const v1::StreamState& header) {
    if (header.decode_step() != step) {
      // Steps of one microbatch arrive in order: another is a late one.
      return absl::FailedPreconditionError(
          absl::StrCat("decode_step: ", header.decode_step(), ", this stage runs step ", step));
    }
    return CheckHandoffHeader(header, d, config_, *group_);
  };
  expect.interrupted = interrupted_;
  const absl::Time deadline = WaitDeadline();
  while (true) {
    absl::StatusOr<handoff::ReceivedHandoff> got = incoming_->Receive(expect, deadline);
    if (got.ok()) {
      late_handoff_possible_ = false;
      return UnframeHandoff(got->header, std::move(got->tensors), group_->tp());
    }
    if (absl::IsDeadlineExceeded(got.status())) late_handoff_possible_ = true;
    // A rejected id or sequence number after a missed wait is most likely
    // that late handoff (the receiver has taken it off the wire): wait again.
    if (late_handoff_possible_ && absl::IsFailedPrecondition(got.status()) && absl::Now() < deadline) {
      SEAM_LOG_WARN("microbatch {}: discarded a late handoff: {}", d.microbatch_id(), std::string(got.status().message()));
      continue;
    }
    if (absl::IsDeadlineExceeded(got.status())) {
      const std::string what = absl::StrCat("waiting for its handoff from pipeline rank ", config_.pipeline_rank() - 1,
                                            " (", got.status().message(), ")");
      if (absl::Status spent = CheckBudget(d, what.c_str()); !spent.ok()) return spent;
    }
    return Annotate(got.status(), absl::StrCat("handoff from pipeline rank ", config_.pipeline_rank() - 1));
  }
}

void MicrobatchRunner::RecordStep(absl::Time started, StepKind kind) {
  if (!metrics_) return;
  metrics_->step[static_cast<size_t>(kind)]->Observe(SecondsSince(started));
  const std::vector<double> waits = group_->LastSynchronizeSeconds();
  for (size_t r = 0; r < waits.size() && r < metrics_->collective.size(); ++r) metrics_->collective[r]->Observe(waits[r]);
  const runtime::GraphDecodeStats stats = group_->GraphStats();
  int64_t replays = 0;
  for (const auto& [bucket, n] : stats.replays) replays += n;
  metrics_->graph_replays.Increment(static_cast<double>(replays - graph_replays_seen_));
  metrics_->eager_steps.Increment(static_cast<double>(stats.eager_steps - eager_steps_seen_));
  graph_replays_seen_ = replays;
  eager_steps_seen_ = stats.eager_steps;
}

}  // namespace seam::server
