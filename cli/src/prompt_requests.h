// Many prompts sent to a coordinator as GenerateAll requests within the
// prompt count it states (GetMetadata: Metadata.limits.max_prompts), every
// request in flight at once. The coordinator owns the limit; a client reads
// it and never builds a request past it.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "seam/v1/coordinator_service.grpc.pb.h"

namespace seam::cli {

// What a coordinator that states no prompt count (0: one older than
// ServingLimits.max_prompts) enforced, as coordinator_service.proto documents.
inline constexpr size_t kOldCoordinatorMaxPrompts = 64;

// The most prompts one GenerateRequest may carry at the coordinator behind
// `stub`: its GetMetadata's limits.max_prompts, or kOldCoordinatorMaxPrompts
// where it states none. A failed GetMetadata is returned with its code
// (CallFailed), its message naming the call.
absl::StatusOr<size_t> PromptsPerRequest(v1::Coordinator::Stub& stub,
                                         std::chrono::system_clock::time_point deadline);

struct PromptRequestsResult {
  // One entry per prompt, in prompt order: its completion's tokens.
  std::vector<std::vector<int32_t>> tokens;
  size_t requests = 0;             // GenerateAll calls made
  size_t prompts_per_request = 0;  // the coordinator's limit they were cut by
};

// GenerateAll of `prompts` under `sampling`: requests of consecutive prompts,
// at most PromptsPerRequest each, sent together from one thread each, with
// request ids "<id_prefix>-<index of the first prompt>" and `deadline`. The
// first failed call (in prompt order) is returned with its code (CallFailed),
// its message naming the call and the grpc code.
absl::StatusOr<PromptRequestsResult> GenerateAllInRequests(v1::Coordinator::Stub& stub,
                                                           const std::vector<std::vector<int32_t>>& prompts,
                                                           const v1::SamplingParams& sampling,
                                                           const std::string& id_prefix,
                                                           std::chrono::system_clock::time_point deadline);

}  // namespace seam::cli
