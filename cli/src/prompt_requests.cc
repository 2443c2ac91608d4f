// prompt_requests.h: the coordinator's prompt count from GetMetadata, then
// one GenerateAll per slice of at most that many prompts.
#include "prompt_requests.h"

#include <algorithm>
#include <thread>

#include "absl/strings/str_cat.h"
#include "grpc_client.h"

namespace seam::cli {

absl::StatusOr<size_t> PromptsPerRequest(v1::Coordinator::Stub& stub,
                                         std::chrono::system_clock::time_point deadline) {
  grpc::ClientContext context;
  context.set_deadline(deadline);
  v1::Metadata metadata;
  const grpc::Status s = stub.GetMetadata(&context, v1::GetMetadataRequest(), &metadata);
  if (!s.ok()) return CallFailed(absl::StrCat("GetMetadata failed: ", DescribeStatus(s)), s);
  const uint32_t stated = metadata.limits().max_prompts();
  // 0: a coordinator older than the field, which enforced the documented 64.
  return stated == 0 ? kOldCoordinatorMaxPrompts : static_cast<size_t>(stated);
}

absl::StatusOr<PromptRequestsResult> GenerateAllInRequests(v1::Coordinator::Stub& stub,
                                                           const std::vector<std::vector<int32_t>>& prompts,
                                                           const v1::SamplingParams& sampling,
                                                           const std::string& id_prefix,
                                                           std::chrono::system_clock::time_point deadline) {
  PromptRequestsResult out;
  absl::StatusOr<size_t> per_request = PromptsPerRequest(stub, deadline);
  if (!per_request.ok()) return per_request.status();
  out.prompts_per_request = *per_request;
  out.tokens.resize(prompts.size());
  out.requests = (prompts.size() + out.prompts_per_request - 1) / out.prompts_per_request;
  std::vector<grpc::Status> statuses(out.requests);
  std::vector<std::thread> senders;
  for (size_t r = 0; r < out.requests; ++r) {
    senders.emplace_back([&, r] {
      const size_t first = r * out.prompts_per_request;
      const size_t count = std::min(out.prompts_per_request, prompts.size() - first);
      v1::GenerateRequest request;
      request.set_request_id(absl::StrCat(id_prefix, "-", first));
      for (size_t i = first; i < first + count; ++i) {
        request.add_prompts()->mutable_token_ids()->Add(prompts[i].begin(), prompts[i].end());
      }
      *request.mutable_sampling() = sampling;
      grpc::ClientContext context;
      context.set_deadline(deadline);
      v1::GenerateResult result;
      statuses[r] = stub.GenerateAll(&context, request, &result);
      if (!statuses[r].ok()) return;
      if (result.completions_size() != static_cast<int>(count)) {
        statuses[r] = grpc::Status(grpc::StatusCode::INTERNAL,
                                   absl::StrCat("request '", request.request_id(), "' of ", count, " prompts got ",
                                                result.completions_size(), " completions"));
        return;
      }
      for (size_t i = 0; i < count; ++i) {
        const v1::Completion& c = result.completions(static_cast<int>(i));
        out.tokens[first + i].assign(c.token_ids().begin(), c.token_ids().end());
      }
    });
  }
  for (std::thread& t : senders) t.join();
  for (const grpc::Status& s : statuses) {
    if (!s.ok()) {
      return CallFailed(absl::StrCat("GenerateAll failed: ", DescribeStatus(s)), s);
    }
  }
  return out;
}

}  // namespace seam::cli
