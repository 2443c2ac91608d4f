// PipelineLimits: what bounds the coordinator's batching and its requests,
// derived once at start-up from the limits every stage reports
// (StageStatus.limits): the least over the stages, then lowered, never
// raised, by the operator's flags. The one source of the coordinator's
// limits: the scheduler's options, request validation, the HTTP API's
// advertised limits (max_model_len is max_context) and any later limit
// flag read these figures. Pure: a test drives it with statuses.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "seam/v1/stage_service.pb.h"
#include "seam/weights/model_config.h"
#include "service/request_validation.h"

namespace seam::coordinator {

// The longest prompt a coordinator takes without chunked prefill unless its
// flag says otherwise (and never more than one microbatch's token rows).
inline constexpr int64_t kDefaultMaxPromptTokens = 2048;

// The operator's caps (coordinator flags); 0: none. A cap above what the
// stages report is lowered to theirs, with a warning naming both.
struct LimitCaps {
  int64_t max_batch_tokens = 0;  // --max-batch-tokens: token rows of one microbatch
  int64_t kv_blocks = 0;         // --kv-blocks: KV blocks per attention-DP group to admit against
  // --max-prompt-tokens; 0: the longest the pipeline takes (the context
  // with chunked prefill, else kDefaultMaxPromptTokens within a microbatch).
  int64_t max_prompt_tokens = 0;
  // --chunked-prefill: a prompt is prefilled in chunks over several
  // microbatches, so it is bounded by the context, not by a microbatch.
  bool chunked_prefill = true;
  // --max-model-len: prompt + generated tokens of one sequence.
  int64_t max_context = 0;
  // --max-num-seqs over the attention-DP groups: sequences one group holds at once.
  int64_t max_sequences_per_dp_group = 0;
};

struct PipelineLimits {
  int64_t max_step_tokens = 0;         // token rows of one microbatch (over all DP groups)
  int64_t kv_blocks_per_dp_group = 0;  // what the scheduler admits against
  int64_t kv_block_size = 0;
  // Sequences one attention-DP group holds at once where a stage keeps
  // Mamba state for each (the least over such stages); 0: no such bound.
  int64_t max_sequences_per_dp_group = 0;
  // Prompt + generated tokens of one sequence: the model's positions, no
  // more than one DP group's KV holds (what an API advertises as its context).
  int64_t max_context = 0;
  // The longest prompt: the context less one (chunked prefill), else what
  // one microbatch holds.
  int64_t max_prompt_tokens = 0;
  // Decode graph sizes every stage replays (sequences per DP group); the
  // batches a microbatch of decode steps runs fastest at.
  std::vector<int64_t> graph_buckets;

  // "max step tokens 8192, KV 512 blocks x 16 tokens per DP group, ..."
  std::string ToString() const;
};

// The limits of a pipeline of `stages` (each READY, in pipeline order;
// `addresses` name them in errors) under `caps`. FAILED_PRECONDITION when a
// stage reports no limits (not loaded) or the stages' KV block sizes differ.
absl::StatusOr<PipelineLimits> DerivePipelineLimits(const std::vector<v1::StageStatus>& stages,
                                                    const std::vector<std::string>& addresses,
                                                    const LimitCaps& caps);

// What a request may ask of a pipeline with `limits` serving `model`: its
// vocabulary, the model's positions, prompts up to max_prompt_tokens; and
// max_context for the APIs to advertise (RequestLimits is what the gRPC
// service and the HTTP front end are given). A
// request within the model's positions but past what the stages' KV holds
// (max_context) is refused by the scheduler, which names the KV budget.
RequestLimits RequestLimitsOf(const PipelineLimits& limits, const weights::ModelConfig& model);

}  // namespace seam::coordinator
