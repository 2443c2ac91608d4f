// The generation loop: batched prefill (in steps of whole prompts within
// the group's step-token limit), then batched decode of the sequences
// still running; token choice through kernels::Sample, each prompt with its own seed.
#include "seam/runtime/generator.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "seam/core/sampling_seed.h"
#include "seam/core/status.h"

namespace seam::runtime {
namespace {

struct Running {
  size_t prompt;         // index into the prompts
  uint64_t sequence;     // id on the stage group
  int64_t length;        // tokens in the cache after this step
  int32_t last;          // the token the next decode step feeds
  int dp_group;          // the attention-DP group it lives on (prompts in turn)
  bool started = false;  // the group has seen it (holds blocks)
};

// Chooses one token per row of `logits` ([1, V] fp32 each) at generation
// `step`; row i belongs to prompt `prompts[i]`, which draws with its own seed
// (seam::SequenceSeed of the options' seed and the prompt's index), as the
// coordinator gives each sequence of a request its own.
absl::StatusOr<std::vector<int32_t>> Choose(const std::vector<Tensor>& rows, const std::vector<size_t>& prompts,
                                            const kernels::SamplingParams& params, int step) {
  std::vector<int32_t> chosen;
  Tensor steps = Tensor::FromInts({step}, {1});
  Tensor out = Tensor::Empty({1}, DType::kI32);
  for (size_t i = 0; i < rows.size(); ++i) {
    kernels::SamplingParams own = params;
    own.seed = SequenceSeed(params.seed, prompts[i]);
    SEAM_RETURN_IF_ERROR(kernels::Sample(rows[i], own, steps, out));
    chosen.push_back(out.data<int32_t>()[0]);
  }
  return chosen;
}

}  // namespace

absl::StatusOr<std::vector<Tensor>> Generator::PrefillInSteps(const std::vector<models::SequenceStep>& batch) {
  const int64_t most = group_->Limits().max_step_tokens;
  std::vector<Tensor> logits;
  for (size_t first = 0; first < batch.size();) {
    // Whole prompts, in order, while they fit the step (a longer prompt alone: the group refuses it).
    size_t end = first;
    int64_t rows = 0;
    while (end < batch.size() &&
           (end == first || most <= 0 || rows + static_cast<int64_t>(batch[end].tokens.size()) <= most)) {
      rows += static_cast<int64_t>(batch[end++].tokens.size());
    }
    SEAM_RETURN_IF_ERROR(StepPart(batch, first, end, logits));
    first = end;
  }
  return logits;
}

absl::Status Generator::StepPart(const std::vector<models::SequenceStep>& batch, size_t first, size_t end,
                                 std::vector<Tensor>& logits) {
  const std::vector<models::SequenceStep> part(batch.begin() + first, batch.begin() + end);
  SEAM_ASSIGN_OR_RETURN(std::vector<Tensor> got, group_->Step(part, false));
  for (Tensor& t : got) logits.push_back(std::move(t));
  return absl::OkStatus();
}

absl::StatusOr<std::vector<Tensor>> Generator::StepInGroups(const std::vector<models::SequenceStep>& batch,
                                                            int groups) {
  const size_t n = batch.size(), share = (n + std::max(groups, 1) - 1) / std::max(groups, 1);
  if (groups <= 1 || share >= n) return group_->Step(batch, false);
  std::vector<Tensor> logits;
  for (size_t first = 0; first < n; first += share) {
    SEAM_RETURN_IF_ERROR(StepPart(batch, first, std::min(n, first + share), logits));
  }
  return logits;
}

absl::StatusOr<GenerationResult> Generator::Generate(const std::vector<std::vector<int32_t>>& prompts,
                                                     const GenerationOptions& options) {
  if (options.max_new_tokens < 0) {
    return absl::InvalidArgumentError(absl::StrCat("max_new_tokens must be >= 0, got ", options.max_new_tokens));
  }
  for (size_t p = 0; p < prompts.size(); ++p) {
    if (prompts[p].empty()) return absl::InvalidArgumentError(absl::StrCat("prompt ", p, " is empty"));
  }
  const int64_t eos = options.eos_token_id == -2 ? group_->config().eos_token_id : options.eos_token_id;
  GenerationResult result;
  result.tokens.resize(prompts.size());
  result.logits.resize(prompts.size());
  if (options.max_new_tokens == 0) return result;

  std::vector<Running> running;
  for (size_t p = 0; p < prompts.size(); ++p) {
    running.push_back(Running{p, next_sequence_++, static_cast<int64_t>(prompts[p].size()), 0,
                              static_cast<int>(p % static_cast<size_t>(group_->attn_dp()))});
  }
  auto free_all = [&] {
    for (const Running& r : running) {
      if (r.started) group_->Free(r.sequence).IgnoreError();
    }
  };

  for (int step = 0; !running.empty(); ++step) {
    std::vector<models::SequenceStep> batch;
    for (const Running& r : running) {
      if (step == 0) {
        batch.push_back(models::SequenceStep{r.sequence, prompts[r.prompt], 0, r.dp_group});
      } else {
        batch.push_back(models::SequenceStep{r.sequence, {r.last}, r.length - 1, r.dp_group});
      }
    }
    absl::StatusOr<std::vector<Tensor>> logits =
        step == 0 ? PrefillInSteps(batch) : StepInGroups(batch, options.decode_groups);
    if (!logits.ok()) {
      // A refused step (cache full) leaves earlier sequences on the group.
      free_all();
      return logits.status();
    }
    for (Running& r : running) r.started = true;
    std::vector<size_t> prompts;
    for (const Running& r : running) prompts.push_back(r.prompt);
    absl::StatusOr<std::vector<int32_t>> chosen = Choose(*logits, prompts, options.sampling, step);
    if (!chosen.ok()) {
      free_all();
      return chosen.status();
    }
    std::vector<Running> still;
    for (size_t i = 0; i < running.size(); ++i) {
      Running r = running[i];
      const int32_t token = (*chosen)[i];
      result.tokens[r.prompt].push_back(token);
      if (options.return_logits) result.logits[r.prompt].push_back((*logits)[i]);
      const bool done = (eos >= 0 && token == eos) ||
                        static_cast<int>(result.tokens[r.prompt].size()) >= options.max_new_tokens;
      if (done) {
        SEAM_RETURN_IF_ERROR(group_->Free(r.sequence));
        continue;
      }
      r.last = token;
      r.length += 1;
      still.push_back(r);
    }
    running = std::move(still);
  }
  return result;
}

}  // namespace seam::runtime
