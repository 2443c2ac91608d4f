// Multi-step decode on a stage: descriptors with decode_steps > 1 gather into
// their wave; a whole wave runs step by step over its members (step 0 of
// each, then step 1 of each, ...), the order every stage of the pipeline
// follows, so that while this stage runs one member the others run other
// members. Step k > 0 feeds the tokens of step k - 1: the last stage chose
// them; a pipeline's first stage receives them from the last over the data
// plane (a handoff header with one int32 tensor "tokens"), checked like any
// handoff (MAC, epoch, microbatch, sequence number, step, shape, checksum).
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "microbatch_runner.h"
#include "seam/core/logging.h"
#include "seam/core/status.h"

namespace seam::server {
namespace {

constexpr char kTokensTensor[] = "tokens";

// `d` as step `step` runs it: each sequence fed tokens[i] at position_start + step.
v1::MicrobatchDescriptor AtStep(const v1::MicrobatchDescriptor& d, uint32_t step, const std::vector<int32_t>& tokens) {
  v1::MicrobatchDescriptor at = d;
  for (int i = 0; i < at.sequences_size(); ++i) {
    v1::SequenceEntry* s = at.mutable_sequences(i);
    s->set_position_start(s->position_start() + step);
    s->clear_token_ids();
    s->add_token_ids(tokens[static_cast<size_t>(i)]);
  }
  return at;
}

}  // namespace

absl::Status MicrobatchRunner::CheckWaveMember(const v1::MicrobatchDescriptor& d) const {
  const uint32_t size = std::max<uint32_t>(1, d.wave_size());
  if (d.wave_index() >= size) {
    return absl::InvalidArgumentError(absl::StrCat("wave_index ", d.wave_index(), " of a wave of ", size));
  }
  if (d.wave_index() != wave_.size()) {
    return absl::InvalidArgumentError(absl::StrCat("wave_index ", d.wave_index(), ", this stage holds ", wave_.size(),
                                                   " members of the wave"));
  }
  if (!wave_.empty() && (wave_.front().wave_size() != d.wave_size() ||
                         wave_.front().decode_steps() != d.decode_steps())) {
    return absl::InvalidArgumentError(absl::StrCat("wave member of ", d.wave_size(), " members and ", d.decode_steps(),
                                                   " steps, its wave has ", wave_.front().wave_size(), " and ",
                                                   wave_.front().decode_steps()));
  }
  for (const v1::SequenceEntry& s : d.sequences()) {
    if (s.is_prefill() || s.token_ids_size() != 1 || s.return_token_logprobs()) {
      return absl::InvalidArgumentError(absl::StrCat("decode_steps ", d.decode_steps(), ": sequence ", s.sequence_id(),
                                                     " is not a one-token decode step without log-probs"));
    }
  }
  return absl::OkStatus();
}

void MicrobatchRunner::AnswerError(const v1::MicrobatchDescriptor& d, const absl::Status& why,
                                   const Answer& answer) const {
  SEAM_LOG_WARN("microbatch {} (sequence {}): {}", d.microbatch_id(), d.sequence_number(), why.ToString());
  answer(Refuse(d, why));
}

void MicrobatchRunner::TakeIntoWave(const v1::MicrobatchDescriptor& d, absl::Time arrived, const Answer& answer) {
  // The wave ends together: its budget is its latest member's.
  if (wave_.empty()) wave_budget_end_ = absl::InfinitePast();
  StartBudget(d, arrived);
  if (budget_end_ > wave_budget_end_) {
    wave_budget_end_ = budget_end_;
    wave_budget_ms_ = budget_ms_;
  }
  absl::Status taken = Take(d).status();
  if (taken.ok()) taken = CheckWaveMember(d);
  if (!taken.ok()) {
    // The wave cannot become whole: its members taken so far fail with it.
    for (const v1::MicrobatchDescriptor& m : wave_) AnswerError(m, taken, answer);
    wave_.clear();
    ahead_.reset();
    return AnswerError(d, taken, answer);
  }
  wave_.push_back(d);
  if (wave_.size() == std::max<uint32_t>(1, d.wave_size())) {
    budget_end_ = wave_budget_end_;
    budget_ms_ = wave_budget_ms_;
    RunWave(answer);
  }
}

void MicrobatchRunner::RunWave(const Answer& answer) {
  std::vector<v1::MicrobatchDescriptor> wave = std::move(wave_);
  wave_.clear();
  const uint32_t steps = wave.front().decode_steps();
  const bool first = group_->is_first_piece(), last = group_->is_last_piece();
  if (first && last && CanFeedWave(wave, steps)) return RunWaveFed(wave, steps, answer);
  ahead_.reset();
  struct Member {
    std::vector<int32_t> tokens;  // what the next step feeds (first or last piece)
    bool failed = false;
  };
  std::vector<Member> members(wave.size());
  for (size_t m = 0; m < wave.size(); ++m) {
    for (const v1::SequenceEntry& s : wave[m].sequences()) members[m].tokens.push_back(s.token_ids(0));
  }
  const absl::Time started = absl::Now();
  for (uint32_t k = 0; k < steps; ++k) {
    for (size_t m = 0; m < wave.size(); ++m) {
      Member& member = members[m];
      if (member.failed) continue;
      const v1::MicrobatchDescriptor& d = wave[m];
      absl::Status status;
      if (k > 0 && first && !last) {
        absl::StatusOr<std::vector<int32_t>> fed = ReceiveTokens(d, k);
        if (fed.ok()) member.tokens = std::move(*fed);
        status = fed.status();
      }
      v1::MicrobatchResult result;
      result.set_microbatch_id(d.microbatch_id());
      if (status.ok()) status = Compute(AtStep(d, k, member.tokens), k, result);
      if (status.ok() && last) {
        for (int i = 0; i < result.sequences_size(); ++i) {
          const v1::SequenceResult& r = result.sequences(i);
          member.tokens[static_cast<size_t>(i)] = r.has_error() ? 0 : r.sampled_token();
        }
        if (!first && k + 1 < steps) status = SendTokens(d, k + 1, member.tokens);
      }
      if (!status.ok()) {
        member.failed = true;
        AnswerError(d, status, answer);
        continue;
      }
      const bool done = k + 1 == steps;
      if (last) {
        result.set_decode_step(k);
        result.set_more(!done);
        answer(std::move(result));
      } else if (done) {
        answer(std::move(result));  // the ack: an answer with no sequences
      }
    }
  }
  SEAM_LOG_DEBUG("wave of {} microbatches x {} steps: {} us in the stage", wave.size(), steps,
                 absl::ToInt64Microseconds(absl::Now() - started));
}

absl::Status MicrobatchRunner::SendTokens(const v1::MicrobatchDescriptor& d, uint32_t step,
                                          const std::vector<int32_t>& tokens) {
  if (!first_.valid()) {
    return absl::FailedPreconditionError("multi-step decode on the last stage, which has no first_stage endpoint");
  }
  v1::StreamState header;
  header.set_microbatch_id(d.microbatch_id());
  header.set_sequence_number(d.sequence_number());
  header.set_epoch(d.epoch());
  header.set_decode_step(step);
  header.set_token_count(tokens.size());
  if (token_sender_ == nullptr) {
    handoff::HandoffSenderOptions send;
    send.key = config_.handoff_key();
    token_sender_ = std::make_unique<handoff::HandoffSender>(worker_, first_, std::move(send));
  }
  const std::vector<std::pair<std::string, Tensor>> payload = {
      {kTokensTensor, Tensor::FromInts(tokens, {static_cast<int64_t>(tokens.size())})}};
  return Annotate(token_sender_->Send(header, payload, SendDeadline()),
                  absl::StrCat("tokens of step ", step, " to pipeline rank 0"));
}

absl::StatusOr<std::vector<int32_t>> MicrobatchRunner::ReceiveTokens(const v1::MicrobatchDescriptor& d,
                                                                     uint32_t step) {
  handoff::HandoffExpectation expect;
  expect.microbatch_id = d.microbatch_id();
  expect.sequence_number = d.sequence_number();
  expect.epoch = d.epoch();
  const auto n = static_cast<int64_t>(d.sequences_size());
  expect.validator = [&](const v1::StreamState& header) -> absl::Status {
    if (header.decode_step() != step) {
      return absl::FailedPreconditionError(
          absl::StrCat("decode_step: ", header.decode_step(), ", this stage runs step ", step));
    }
    if (header.tensors_size() != 1 || header.tensors(0).name() != kTokensTensor ||
        header.tensors(0).dtype() != v1::DTYPE_I32 || header.tensors(0).shape_size() != 1 ||
        header.tensors(0).shape(0) != n) {
      return absl::InvalidArgumentError(absl::StrCat("tokens of step ", step, ": expected one int32 tensor '",
                                                     kTokensTensor, "' of ", n, " tokens"));
    }
    return absl::OkStatus();
  };
  expect.interrupted = interrupted_;
  absl::StatusOr<handoff::ReceivedHandoff> got = token_receiver_->Receive(expect, WaitDeadline());
  if (!got.ok()) {
    if (absl::IsDeadlineExceeded(got.status())) {
      const std::string what = absl::StrCat("waiting for the tokens of step ", step, " from pipeline rank ",
                                            config_.pipeline_size() - 1, " (", got.status().message(), ")");
      if (absl::Status spent = CheckBudget(d, what.c_str()); !spent.ok()) return spent;
    }
    return Annotate(got.status(),
                    absl::StrCat("tokens of step ", step, " from pipeline rank ", config_.pipeline_size() - 1));
  }
  const int32_t* data = got->tensors.front().data<int32_t>();
  std::vector<int32_t> tokens(data, data + n);
  for (int32_t token : tokens) {
    if (token < 0 || token >= group_->config().vocab_size) {
      return absl::InvalidArgumentError(absl::StrCat("tokens of step ", step, ": token ", token, " outside [0, ",
                                                     group_->config().vocab_size, ")"));
    }
  }
  return tokens;
}

}  // namespace seam::server
