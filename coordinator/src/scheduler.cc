// Scheduler creation and option checks, Submit, Cancel and how a request ends.
#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "scheduler_impl.h"
#include "seam/core/status.h"

namespace seam::coordinator {
namespace {

absl::Status CheckAtLeast(const char* field, int value, int minimum) {
  if (value >= minimum) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("SchedulerOptions.", field, " = ", value, ": must be at least ", minimum));
}

absl::Status CheckOptions(const SchedulerOptions& o) {
  SEAM_RETURN_IF_ERROR(CheckAtLeast("pipeline_stages", o.pipeline_stages, 1));
  SEAM_RETURN_IF_ERROR(CheckAtLeast("dp_groups", o.dp_groups, 1));
  SEAM_RETURN_IF_ERROR(CheckAtLeast("kv_blocks_per_dp_group", o.kv_blocks_per_dp_group, 1));
  SEAM_RETURN_IF_ERROR(CheckAtLeast("block_size", o.block_size, 1));
  SEAM_RETURN_IF_ERROR(
      CheckAtLeast("max_tokens_per_microbatch", o.max_tokens_per_microbatch, 1));
  SEAM_RETURN_IF_ERROR(
      CheckAtLeast("max_sequences_per_microbatch", o.max_sequences_per_microbatch, 1));
  SEAM_RETURN_IF_ERROR(CheckAtLeast("max_sequences_per_dp_group", o.max_sequences_per_dp_group, 0));
  SEAM_RETURN_IF_ERROR(
      CheckAtLeast("max_inflight_microbatches", o.max_inflight_microbatches, 0));
  SEAM_RETURN_IF_ERROR(CheckAtLeast("max_queue", o.max_queue, 0));
  SEAM_RETURN_IF_ERROR(CheckAtLeast("max_decode_steps", o.max_decode_steps, 1));
  if (o.max_decode_steps > kMaxDecodeSteps) {
    return absl::InvalidArgumentError(absl::StrCat("max_decode_steps is ", o.max_decode_steps, ", at most ",
                                                   kMaxDecodeSteps, " are allowed"));
  }
  SEAM_RETURN_IF_ERROR(CheckAtLeast("first_decode_steps", o.first_decode_steps, 1));
  SEAM_RETURN_IF_ERROR(CheckAtLeast("max_context", o.max_context, 0));
  if (o.chunked_prefill) {
    SEAM_RETURN_IF_ERROR(CheckAtLeast("prefill_chunk_tokens", o.prefill_chunk_tokens, 1));
  }
  if (!std::isfinite(o.itl_target_ms) || o.itl_target_ms < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("SchedulerOptions.itl_target_ms = ", o.itl_target_ms, ": must be finite and at least 0"));
  }
  if (o.overlap_steps && o.pipeline_stages != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "SchedulerOptions.overlap_steps needs one pipeline stage (the stage that chooses a token feeds it to the "
        "next step), got pipeline_stages = ", o.pipeline_stages));
  }
  if (o.itl_target_ms > 0 && !o.chunked_prefill) {
    return absl::InvalidArgumentError(absl::StrCat("SchedulerOptions.itl_target_ms = ", o.itl_target_ms,
                                                   " needs chunked_prefill: a whole prompt cannot be cut to it"));
  }
  return absl::OkStatus();
}

SchedulerOptions Resolve(SchedulerOptions o) {
  if (o.max_inflight_microbatches == 0) o.max_inflight_microbatches = o.pipeline_stages;
  return o;
}

}  // namespace

const char* FinishReasonName(FinishReason reason) {
  switch (reason) {
    case FinishReason::kMaxTokens: return "max_tokens";
    case FinishReason::kStopToken: return "stop_token";
    case FinishReason::kCancelled: return "cancelled";
    case FinishReason::kStopString: return "stop_string";
  }
  return "unknown";
}

absl::StatusOr<std::unique_ptr<Scheduler>> Scheduler::Create(const SchedulerOptions& options) {
  SEAM_RETURN_IF_ERROR(CheckOptions(options));
  return std::unique_ptr<Scheduler>(new SchedulerImpl(Resolve(options)));
}

SchedulerImpl::SchedulerImpl(const SchedulerOptions& options)
    : options_(options),
      kv_(options.dp_groups, options.kv_blocks_per_dp_group, options.block_size),
      prefix_(options.dp_groups, options.block_size),
      sequences_on_group_(options.dp_groups, 0),
      epoch_(options.first_epoch) {}

absl::Status SchedulerImpl::Submit(const Request& request) {
  if (request.id.empty()) return absl::InvalidArgumentError("request id is empty");
  if (request.prompt_tokens < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "request '", request.id, "': prompt has ", request.prompt_tokens,
        " tokens; at least 1 is needed"));
  }
  if (request.max_new_tokens < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "request '", request.id, "': max_new_tokens = ", request.max_new_tokens,
        "; at least 1 is needed"));
  }
  const int64_t kv_tokens =
      static_cast<int64_t>(request.prompt_tokens) + request.max_new_tokens;
  const int64_t capacity_tokens =
      static_cast<int64_t>(kv_.Capacity()) * kv_.BlockSize();
  if (kv_tokens > capacity_tokens) {
    return absl::InvalidArgumentError(absl::StrCat(
        "request '", request.id, "': prompt of ", request.prompt_tokens,
        " tokens + max_new_tokens ", request.max_new_tokens, " = ", kv_tokens,
        " tokens of KV can never fit one attention-DP group's budget of ", kv_.Capacity(),
        " blocks x ", kv_.BlockSize(), " tokens = ", capacity_tokens, " tokens"));
  }
  if (!options_.chunked_prefill && request.prompt_tokens > options_.max_tokens_per_microbatch) {
    return absl::InvalidArgumentError(absl::StrCat(
        "request '", request.id, "': prompt of ", request.prompt_tokens,
        " tokens exceeds max_tokens_per_microbatch ", options_.max_tokens_per_microbatch,
        " and chunked prefill is off"));
  }
  if (requests_.count(request.id) != 0) {
    return absl::AlreadyExistsError(
        absl::StrCat("request '", request.id, "' is already queued or running"));
  }
  if (static_cast<int>(queue_.size()) >= options_.max_queue) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "request '", request.id, "': admission queue is full (", queue_.size(), " of ",
        options_.max_queue, " waiting)"));
  }
  RequestState state;
  state.request = request;
  state.prefill_target = request.prompt_tokens;
  state.cache_tokens = request.cache_tokens;
  requests_.emplace(request.id, std::move(state));
  queue_.push_back(request.id);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<SchedulerEvent>> SchedulerImpl::Cancel(const std::string& request_id) {
  auto it = requests_.find(request_id);
  if (it == requests_.end()) {
    return absl::NotFoundError(absl::StrCat("request '", request_id, "' is not live"));
  }
  std::vector<SchedulerEvent> events;
  if (it->second.in_flight) {
    it->second.cancelled = true;  // ends when its microbatch comes back
    return events;
  }
  End(request_id, Finished(request_id, FinishReason::kCancelled), events);
  return events;
}

void SchedulerImpl::End(const std::string& request_id, SchedulerEvent event,
                        std::vector<SchedulerEvent>& events) {
  auto it = requests_.find(request_id);
  SEAM_CHECK_MSG(it != requests_.end(), "ending unknown request ", request_id);
  RequestState& state = it->second;
  if (state.phase == Phase::kQueued) {
    queue_.erase(std::find(queue_.begin(), queue_.end(), request_id));
  } else {
    kv_.Release(state.dp_group, state.blocks);
    ReleaseCached(state);
    sequences_on_group_[state.dp_group] -= 1;
    running_.erase(state.admit_order);
  }
  requests_.erase(it);
  events.push_back(std::move(event));
}

SchedulerEvent SchedulerImpl::Finished(const std::string& id, FinishReason reason) {
  SchedulerEvent event;
  event.kind = SchedulerEvent::Kind::kFinished;
  event.request_id = id;
  event.reason = reason;
  return event;
}

SchedulerEvent SchedulerImpl::Failed(const std::string& id, const absl::Status& status) {
  SchedulerEvent event;
  event.kind = SchedulerEvent::Kind::kFailed;
  event.request_id = id;
  event.status = status;
  return event;
}

}  // namespace seam::coordinator
