// A wave of multi-step decode on a stage that holds the whole model (PP 1)
// on one GPU with graph decode: each step runs fed on the device
// (runtime::StageGroup::StepFed), its input tokens the previous step's
// chosen tokens where they already are, and the stage enqueues step k + 1
// of a member before it waits for step k's tokens and answers it, so that
// building a step and answering one overlap the GPU's work instead of
// following it. Answers, their order and the tokens are those of
// RunWave's step-by-step path. A wave of one member also runs the step
// after its last one ahead (MicrobatchRunner::set_run_ahead), which the next
// wave takes as its step 0 when it continues the same sequences.
// Steps overlap on the device (one is enqueued before the previous one's
// tokens are read) and a step run ahead is enqueued before its wave comes:
// seam:stage_step_seconds times each step from its enqueue, the wave's start
// or the previous answer, whichever is last, so that the steps' times add up
// to the stage's busy time.
#include <algorithm>
#include <deque>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "microbatch_runner.h"
#include "run_ahead.h"
#include "seam/core/logging.h"

namespace seam::server {
namespace {

// The sequences of `d` at decode step `step`: one token each, `step`
// positions on; the token is the descriptor's at step 0, a placeholder that
// the fed step replaces at later steps.
std::vector<models::SequenceStep> StepsAt(const v1::MicrobatchDescriptor& d, uint32_t step) {
  std::vector<models::SequenceStep> steps;
  steps.reserve(static_cast<size_t>(d.sequences_size()));
  for (const v1::SequenceEntry& s : d.sequences()) {
    steps.push_back(models::SequenceStep{s.sequence_id(), {step == 0 ? s.token_ids(0) : 0},
                                         static_cast<int64_t>(s.position_start() + step),
                                         static_cast<int>(s.dp_group())});
  }
  return steps;
}

}  // namespace

bool MicrobatchRunner::CanFeedWave(const std::vector<v1::MicrobatchDescriptor>& wave, uint32_t steps) const {
  // Every member's latest step must stay held while the others run theirs.
  constexpr size_t kMostMembers = 16;
  if (!group_->is_first_piece() || !group_->is_last_piece() || wave.size() > kMostMembers || steps < 1) return false;
  for (const v1::MicrobatchDescriptor& d : wave) {
    if (!group_->CanStepFed(StepsAt(d, 0)) || !group_->CanStepFed(StepsAt(d, steps - 1))) return false;
    // A step is enqueued before the previous one's tokens reach the host: only choices that need no history.
    if (!sampler_.Plain(d)) return false;
  }
  return true;
}

void MicrobatchRunner::RunWaveFed(const std::vector<v1::MicrobatchDescriptor>& wave, uint32_t steps,
                                  const Answer& answer) {
  struct Member {
    std::optional<runtime::FedStep> latest;  // the step the next one feeds from
    bool failed = false;
  };
  struct Enqueued {
    size_t member;
    uint32_t step;
    runtime::FedStep fed;
    absl::Time at;
  };
  std::vector<Member> members(wave.size());
  std::deque<Enqueued> enqueued;
  std::vector<int32_t> last_tokens;  // of the newest step answered
  const absl::Time started = absl::Now();
  absl::Time busy_from = started;  // a step's time starts here at the earliest (see the top)
  // Waits for the oldest enqueued step's tokens and answers it.
  const auto answer_oldest = [&] {
    const Enqueued e = enqueued.front();
    enqueued.pop_front();
    Member& member = members[e.member];
    if (member.failed) return;
    const v1::MicrobatchDescriptor& d = wave[e.member];
    absl::StatusOr<std::vector<int32_t>> tokens = group_->FedTokens(e.fed);
    if (!tokens.ok()) {
      member.failed = true;
      return AnswerError(d, tokens.status(), answer);
    }
    RecordStep(std::max(e.at, std::exchange(busy_from, absl::Now())), StepKind::kDecode);
    last_tokens = *tokens;
    v1::MicrobatchResult result;
    result.set_microbatch_id(d.microbatch_id());
    for (v1::SequenceResult& s : sampler_.Results(d, *tokens)) *result.add_sequences() = std::move(s);
    result.set_decode_step(e.step);
    result.set_more(e.step + 1 < steps);
    answer(std::move(result));
  };
  // Run() kept the step run ahead only for the member that continues it.
  std::optional<Ahead> ahead = std::move(ahead_);
  ahead_.reset();
  const bool resumed = ahead.has_value() && wave.size() == 1;
  if (resumed) {
    members[0].latest = ahead->fed;
    enqueued.push_back(Enqueued{0, 0, ahead->fed, ahead->at});
  }
  for (uint32_t k = resumed ? 1 : 0; k < steps; ++k) {
    for (size_t m = 0; m < wave.size(); ++m) {
      Member& member = members[m];
      if (member.failed) continue;
      const v1::MicrobatchDescriptor& d = wave[m];
      const absl::Time at = absl::Now();
      absl::StatusOr<runtime::FedStep> fed =
          group_->StepFed(StepsAt(d, k), sampler_.Choices(d, k), member.latest ? &*member.latest : nullptr);
      if (!fed.ok()) {
        while (!enqueued.empty()) answer_oldest();  // the steps before this one keep their answers
        member.failed = true;
        AnswerError(d, fed.status(), answer);
        continue;
      }
      member.latest = *fed;
      enqueued.push_back(Enqueued{m, k, *fed, at});
      // One step stays queued on the GPU while the host answers the one before.
      while (enqueued.size() > 1) answer_oldest();
    }
  }
  // The step after the wave goes on the GPU before the last answer is
  // awaited, so that it runs while the answer travels.
  const bool ahead_run = wave.size() == 1 && !members[0].failed && members[0].latest.has_value() &&
                         RunAhead(wave[0], steps, *members[0].latest);
  while (!enqueued.empty()) answer_oldest();
  if (ahead_run && !members[0].failed && last_tokens.size() == static_cast<size_t>(wave[0].sequences_size())) {
    ahead_->inputs = last_tokens;
  } else {
    ahead_.reset();
  }
  SEAM_LOG_DEBUG("wave of {} microbatches x {} steps fed on the device{}{}: {} us in the stage", wave.size(), steps,
                 resumed ? ", its first step run ahead" : "", ahead_.has_value() ? ", the next step run ahead" : "",
                 absl::ToInt64Microseconds(absl::Now() - started));
}

bool MicrobatchRunner::RunAhead(const v1::MicrobatchDescriptor& d, uint32_t steps, const runtime::FedStep& last) {
  ahead_.reset();
  if (!run_ahead_ || group_->config().hybrid_override_pattern.find('M') != std::string::npos) return false;
  const std::vector<models::SequenceStep> next = StepsAt(d, steps);
  if (!group_->CanStepFed(next)) return false;
  const absl::Time at = absl::Now();
  // Refused without running when its KV blocks are not free (the
  // coordinator reserves them; a stage that admits more than it does not).
  absl::StatusOr<runtime::FedStep> fed = group_->StepFed(next, sampler_.Choices(d, steps), &last);
  if (!fed.ok()) {
    SEAM_LOG_DEBUG("microbatch {}: no step run ahead: {}", d.microbatch_id(), fed.status().ToString());
    return false;
  }
  ahead_ = Ahead{d, steps, *fed, {}, at};
  return true;
}

bool MicrobatchRunner::ContinuesAhead(const v1::MicrobatchDescriptor& d) const {
  return ContinuesWave(ahead_->wave, ahead_->steps, ahead_->inputs, d);
}

}  // namespace seam::server
