// DerivePipelineLimits (pipeline_limits.h): the least over the stages, then
// the operator's caps, each lowering only.
#include "service/pipeline_limits.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "seam/core/logging.h"

namespace seam::coordinator {
namespace {

// The least of `figure` over the stages that report one (0: none does).
int64_t Least(int64_t current, uint64_t figure) {
  const int64_t f = static_cast<int64_t>(figure);
  if (f <= 0) return current;
  return current == 0 ? f : std::min(current, f);
}

// `cap` lowers `*figure`; a cap above it is lowered to it, with a warning.
void Cap(const char* flag, int64_t cap, const char* what, int64_t* figure) {
  if (cap <= 0) return;
  if (cap > *figure) {
    SEAM_LOG_WARN("{} {} exceeds the {} {} the stages report; using theirs", flag, cap, *figure, what);
    return;
  }
  *figure = cap;
}

// The buckets every stage replays.
std::vector<int64_t> CommonBuckets(const std::vector<v1::StageStatus>& stages) {
  std::set<uint64_t> common(stages.front().limits().graph_buckets().begin(),
                            stages.front().limits().graph_buckets().end());
  for (const v1::StageStatus& s : stages) {
    const std::set<uint64_t> mine(s.limits().graph_buckets().begin(), s.limits().graph_buckets().end());
    std::set<uint64_t> both;
    for (uint64_t b : common) {
      if (mine.count(b) != 0) both.insert(b);
    }
    common = both;
  }
  return std::vector<int64_t>(common.begin(), common.end());
}

}  // namespace

absl::StatusOr<PipelineLimits> DerivePipelineLimits(const std::vector<v1::StageStatus>& stages,
                                                    const std::vector<std::string>& addresses,
                                                    const LimitCaps& caps) {
  if (stages.empty()) return absl::FailedPreconditionError("a pipeline of no stage has no limits");
  PipelineLimits l;
  for (size_t k = 0; k < stages.size(); ++k) {
    const v1::StageLimits& s = stages[k].limits();
    const std::string name = k < addresses.size() ? addresses[k] : absl::StrCat(k);
    if (s.kv_blocks_per_dp_group() == 0 || s.kv_block_size() == 0 || s.max_step_tokens() == 0) {
      return absl::FailedPreconditionError(absl::StrCat("stage ", name, " reports no step limits (state ",
                                                        v1::StageState_Name(stages[k].state()), ")"));
    }
    if (l.kv_block_size != 0 && static_cast<int64_t>(s.kv_block_size()) != l.kv_block_size) {
      return absl::FailedPreconditionError(absl::StrCat("stage ", name, " has KV blocks of ", s.kv_block_size(),
                                                        " tokens, an earlier stage of ", l.kv_block_size));
    }
    l.kv_block_size = static_cast<int64_t>(s.kv_block_size());
    l.max_step_tokens = Least(l.max_step_tokens, s.max_step_tokens());
    l.kv_blocks_per_dp_group = Least(l.kv_blocks_per_dp_group, s.kv_blocks_per_dp_group());
    l.max_sequences_per_dp_group = Least(l.max_sequences_per_dp_group, s.state_slots_per_dp_group());
    l.max_context = Least(l.max_context, s.max_context());
  }
  l.graph_buckets = CommonBuckets(stages);
  Cap("--max-batch-tokens", caps.max_batch_tokens, "token rows of a stage's step", &l.max_step_tokens);
  Cap("--kv-blocks", caps.kv_blocks, "KV blocks per DP group", &l.kv_blocks_per_dp_group);
  Cap("--max-model-len", caps.max_context, "context tokens", &l.max_context);
  if (l.max_sequences_per_dp_group == 0) {  // the stages set no bound: the cap is the bound
    l.max_sequences_per_dp_group = caps.max_sequences_per_dp_group;
  } else {
    Cap("--max-num-seqs", caps.max_sequences_per_dp_group, "sequences per DP group", &l.max_sequences_per_dp_group);
  }
  // A prompt leaves room for a token; without chunked prefill it is
  // prefilled in one microbatch.
  l.max_prompt_tokens = l.max_context - 1;
  if (!caps.chunked_prefill) {
    l.max_prompt_tokens = std::min({l.max_prompt_tokens, l.max_step_tokens, kDefaultMaxPromptTokens});
  }
  if (caps.max_prompt_tokens > 0) {
    l.max_prompt_tokens = std::min(l.max_prompt_tokens, caps.max_prompt_tokens);
    if (!caps.chunked_prefill) l.max_prompt_tokens = std::min(l.max_prompt_tokens, l.max_step_tokens);
  }
  return l;
}

RequestLimits RequestLimitsOf(const PipelineLimits& limits, const weights::ModelConfig& model) {
  RequestLimits r;
  r.vocab_size = model.vocab_size;
  r.max_positions = model.max_position_embeddings;
  r.max_prompt_tokens = limits.max_prompt_tokens;
  r.max_context = limits.max_context;
  return r;
}

std::string PipelineLimits::ToString() const {
  return absl::StrCat("max step tokens ", max_step_tokens, ", KV ", kv_blocks_per_dp_group, " blocks x ",
                      kv_block_size, " tokens per DP group, ",
                      max_sequences_per_dp_group > 0 ? absl::StrCat(max_sequences_per_dp_group, " sequences")
                                                     : std::string("no sequence bound"),
                      " per DP group, contexts up to ", max_context, " tokens, prompts up to ", max_prompt_tokens,
                      " tokens, decode graphs [", absl::StrJoin(graph_buckets, ","), "]");
}

}  // namespace seam::coordinator
