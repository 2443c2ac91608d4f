// `seam generate` / `seam submit`: parses token-id prompts (or takes text
// ones), sends one GenerateRequest (GenerateAll, or Generate with --stream)
// and prints each prompt's tokens, or its text, or one JSON document.
#include <iostream>
#include <map>

#include <nlohmann/json.hpp>

#include <unistd.h>

#include "absl/strings/numbers.h"
#include "absl/time/clock.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "grpc_client.h"
#include "client_commands.h"
#include "seam/v1/coordinator_service.grpc.pb.h"

namespace seam::cli {
namespace {

bool ParsePrompt(const std::string& text, std::vector<int32_t>* tokens) {
  for (absl::string_view piece : absl::StrSplit(text, absl::ByAnyChar(" ,\t"), absl::SkipEmpty())) {
    int32_t t = 0;
    if (!absl::SimpleAtoi(piece, &t) || t < 0) return false;
    tokens->push_back(t);
  }
  return !tokens->empty();
}

std::string FinishName(v1::FinishReason r) {
  switch (r) {
    case v1::FINISH_REASON_MAX_NEW_TOKENS: return "max_new_tokens";
    case v1::FINISH_REASON_STOP_TOKEN: return "stop_token";
    case v1::FINISH_REASON_CONTEXT_LENGTH: return "context_length";
    default: return "unspecified";
  }
}

}  // namespace

absl::Status RunGenerateCommand(const GenerateCommandOptions& o, std::ostream& out) {
  std::vector<std::vector<int32_t>> prompts(o.prompts.size());
  for (size_t i = 0; i < o.prompts.size(); ++i) {
    if (!ParsePrompt(o.prompts[i], &prompts[i])) {
      return absl::InvalidArgumentError(
          absl::StrCat("--prompt \"", o.prompts[i], "\" is not a list of token ids like \"3 14 15\""));
    }
  }
  const bool text = !o.text_prompts.empty();
  if (text && !prompts.empty()) {
    return absl::InvalidArgumentError("give text prompts or --prompt token ids, not both");
  }
  if (text) prompts.resize(o.text_prompts.size());
  if (o.addr.empty() || prompts.empty() || o.max_new_tokens < 1 || o.temperature < 0 || o.top_k < 0 ||
      o.top_p < 0 || o.top_p > 1 || o.timeout_s <= 0) {
    return absl::InvalidArgumentError(
        "needs --addr and at least one text prompt or --prompt; --max-new-tokens >= 1, --temperature >= 0, "
        "--top-k >= 0, "
        "--top-p within [0, 1], --timeout > 0");
  }
  v1::GenerateRequest request;
  // Unique per call, so that the coordinator's logs and errors tell calls apart.
  request.set_request_id(absl::StrCat("seam-generate-", getpid(), "-", absl::ToUnixMicros(absl::Now())));
  for (const auto& p : prompts) {
    if (!text) request.add_prompts()->mutable_token_ids()->Add(p.begin(), p.end());
  }
  for (const std::string& t : o.text_prompts) request.add_text_prompts(t);
  v1::SamplingParams* s = request.mutable_sampling();
  s->set_temperature(o.temperature);
  s->set_top_k(static_cast<uint32_t>(o.top_k));
  s->set_top_p(o.top_p);
  if (o.seed) s->set_seed(*o.seed);
  s->set_max_new_tokens(static_cast<uint32_t>(o.max_new_tokens));

  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel = security::MakeChannel(o.security, o.addr);
  if (!channel.ok()) return channel.status();
  auto stub = v1::Coordinator::NewStub(*channel);
  auto context = ContextWithTimeout(o.timeout_s);
  std::vector<std::vector<int32_t>> tokens(prompts.size());
  std::vector<v1::FinishReason> finish(prompts.size(), v1::FINISH_REASON_UNSPECIFIED);
  std::vector<std::string> texts(prompts.size());
  grpc::Status status;
  if (o.stream) {
    auto reader = stub->Generate(context.get(), request);
    v1::GenerateResponse r;
    while (reader->Read(&r)) {
      const uint32_t i = r.sequence_index();
      if (i >= prompts.size()) continue;
      tokens[i].insert(tokens[i].end(), r.token_ids().begin(), r.token_ids().end());
      if (r.finish_reason() != v1::FINISH_REASON_UNSPECIFIED) finish[i] = r.finish_reason();
      texts[i] += r.text();
      if (o.json) continue;
      if (text && prompts.size() == 1) {
        out << r.text() << std::flush;  // the text as it comes
      } else if (text && !r.text().empty()) {
        out << "[" << i << "] +" << nlohmann::json(r.text()).dump() << std::endl;
      } else if (!text && r.token_ids_size() > 0) {
        out << "[" << i << "] +" << absl::StrJoin(r.token_ids(), " ") << std::endl;
      }
    }
    status = reader->Finish();
  } else {
    v1::GenerateResult result;
    status = stub->GenerateAll(context.get(), request, &result);
    for (int i = 0; status.ok() && i < result.completions_size() && i < static_cast<int>(prompts.size()); ++i) {
      tokens[i].assign(result.completions(i).token_ids().begin(), result.completions(i).token_ids().end());
      finish[i] = result.completions(i).finish_reason();
      texts[i] = result.completions(i).text();
    }
  }
  // The coordinator's id of the call (its logs' request_id), sent as
  // trailing metadata whether the call succeeded or not.
  std::string server_request_id;
  const auto& trailers = context->GetServerTrailingMetadata();
  if (auto it = trailers.find("seam-server-request-id"); it != trailers.end()) {
    server_request_id.assign(it->second.data(), it->second.size());
  }
  if (!status.ok()) {
    return CallFailed(absl::StrCat(o.stream ? "Generate" : "GenerateAll", " on ", o.addr, " failed",
                                   server_request_id.empty() ? "" : absl::StrCat(" (request ", server_request_id, ")"),
                                   ": ", DescribeStatus(status)),
                      status);
  }
  if (o.json) {
    nlohmann::json doc = {{"request_id", request.request_id()},
                          {"server_request_id", server_request_id},
                          {"completions", nlohmann::json::array()}};
    for (size_t i = 0; i < prompts.size(); ++i) {
      nlohmann::json prompt = text ? nlohmann::json(o.text_prompts[i]) : nlohmann::json(prompts[i]);
      doc["completions"].push_back({{"prompt", prompt},
                                    {"tokens", tokens[i]},
                                    {"text", texts[i]},
                                    {"finish_reason", FinishName(finish[i])}});
    }
    out << doc.dump(2) << "\n";
    return absl::OkStatus();
  }
  if (text) {
    if (o.stream && prompts.size() == 1) {
      out << "\n";
      return absl::OkStatus();
    }
    for (size_t i = 0; i < prompts.size(); ++i) {
      if (prompts.size() > 1) out << "[" << i << "] ";
      out << texts[i] << (prompts.size() > 1 ? absl::StrCat(" (", FinishName(finish[i]), ")") : "") << "\n";
    }
    return absl::OkStatus();
  }
  for (size_t i = 0; i < prompts.size(); ++i) {
    out << "prompt " << i << " [" << absl::StrJoin(prompts[i], " ") << "] -> [" << absl::StrJoin(tokens[i], " ")
        << "] (" << FinishName(finish[i]) << ")\n";
  }
  return absl::OkStatus();
}

}  // namespace seam::cli
