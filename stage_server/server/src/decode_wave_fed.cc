// A wave of multi-step decode on a stage that holds the whole model (PP 1)
// on one GPU with graph decode: each step runs fed on the device
// (runtime::StageGroup::StepFed), its input tokens the previous step's
// chosen tokens where they already are, and the stage enqueues step k + 1
// of a member before it waits for step k's tokens and answers it, so that
// building a step and answering one overlap the GPU's work instead of
// following it. Answers, their order and the tokens are those of
// RunWave's step-by-step path.
#include <deque>
#include <optional>
#include <utility>
#include <vector>

#include "microbatch_runner.h"
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
    if (metrics_) RecordStep(absl::ToDoubleSeconds(absl::Now() - e.at));
    v1::MicrobatchResult result;
    result.set_microbatch_id(d.microbatch_id());
    for (v1::SequenceResult& s : SequenceSampler::Results(d, *tokens)) *result.add_sequences() = std::move(s);
    result.set_decode_step(e.step);
    result.set_more(e.step + 1 < steps);
    answer(std::move(result));
  };
  const absl::Time started = absl::Now();
  for (uint32_t k = 0; k < steps; ++k) {
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
  while (!enqueued.empty()) answer_oldest();
  SEAM_LOG_DEBUG("wave of {} microbatches x {} steps fed on the device: {} us in the stage", wave.size(), steps,
                 absl::ToInt64Microseconds(absl::Now() - started));
}

}  // namespace seam::server
