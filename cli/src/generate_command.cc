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
#include "seam/core/status.h"
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

// The prompts of `o` as token ids (empty per text prompt). INVALID_ARGUMENT
// naming the flag that does not parse or fit.
absl::StatusOr<std::vector<std::vector<int32_t>>> Prompts(const GenerateCommandOptions& o) {
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
  return prompts;
}

v1::GenerateRequest Request(const GenerateCommandOptions& o, const std::vector<std::vector<int32_t>>& prompts) {
  v1::GenerateRequest request;
  // Unique per call, so that the coordinator's logs and errors tell calls apart.
  request.set_request_id(absl::StrCat("seam-generate-", getpid(), "-", absl::ToUnixMicros(absl::Now())));
  const bool text = !o.text_prompts.empty();
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
  return request;
}

// What came back for each prompt.
struct Completions {
  explicit Completions(size_t n) : tokens(n), finish(n, v1::FINISH_REASON_UNSPECIFIED), texts(n) {}
  std::vector<std::vector<int32_t>> tokens;
  std::vector<v1::FinishReason> finish;
  std::vector<std::string> texts;
};

// The streaming call, printing pieces as they come unless --json.
grpc::Status CallStreaming(v1::Coordinator::Stub& stub, grpc::ClientContext* context,
                           const v1::GenerateRequest& request, const GenerateCommandOptions& o, Completions& c,
                           std::ostream& out) {
  const bool text = !o.text_prompts.empty();
  const size_t n = c.tokens.size();
  auto reader = stub.Generate(context, request);
  v1::GenerateResponse r;
  while (reader->Read(&r)) {
    const uint32_t i = r.sequence_index();
    if (i >= n) continue;
    c.tokens[i].insert(c.tokens[i].end(), r.token_ids().begin(), r.token_ids().end());
    if (r.finish_reason() != v1::FINISH_REASON_UNSPECIFIED) c.finish[i] = r.finish_reason();
    c.texts[i] += r.text();
    if (o.json) continue;
    if (text && n == 1) {
      out << r.text() << std::flush;  // the text as it comes
    } else if (text && !r.text().empty()) {
      out << "[" << i << "] +" << nlohmann::json(r.text()).dump() << std::endl;
    } else if (!text && r.token_ids_size() > 0) {
      out << "[" << i << "] +" << absl::StrJoin(r.token_ids(), " ") << std::endl;
    }
  }
  return reader->Finish();
}

grpc::Status CallAll(v1::Coordinator::Stub& stub, grpc::ClientContext* context, const v1::GenerateRequest& request,
                     Completions& c) {
  v1::GenerateResult result;
  grpc::Status status = stub.GenerateAll(context, request, &result);
  for (int i = 0; status.ok() && i < result.completions_size() && i < static_cast<int>(c.tokens.size()); ++i) {
    c.tokens[i].assign(result.completions(i).token_ids().begin(), result.completions(i).token_ids().end());
    c.finish[i] = result.completions(i).finish_reason();
    c.texts[i] = result.completions(i).text();
  }
  return status;
}

void PrintJson(const GenerateCommandOptions& o, const std::vector<std::vector<int32_t>>& prompts,
               const std::string& request_id, const std::string& server_request_id, const Completions& c,
               std::ostream& out) {
  nlohmann::json doc = {{"request_id", request_id},
                        {"server_request_id", server_request_id},
                        {"completions", nlohmann::json::array()}};
  const bool text = !o.text_prompts.empty();
  for (size_t i = 0; i < prompts.size(); ++i) {
    nlohmann::json prompt = text ? nlohmann::json(o.text_prompts[i]) : nlohmann::json(prompts[i]);
    doc["completions"].push_back({{"prompt", prompt},
                                  {"tokens", c.tokens[i]},
                                  {"text", c.texts[i]},
                                  {"finish_reason", FinishName(c.finish[i])}});
  }
  out << doc.dump(2) << "\n";
}

void PrintCompletions(const GenerateCommandOptions& o, const std::vector<std::vector<int32_t>>& prompts,
                      const Completions& c, std::ostream& out) {
  if (o.text_prompts.empty()) {
    for (size_t i = 0; i < prompts.size(); ++i) {
      out << "prompt " << i << " [" << absl::StrJoin(prompts[i], " ") << "] -> ["
          << absl::StrJoin(c.tokens[i], " ") << "] (" << FinishName(c.finish[i]) << ")\n";
    }
    return;
  }
  if (o.stream && prompts.size() == 1) {
    out << "\n";
    return;
  }
  for (size_t i = 0; i < prompts.size(); ++i) {
    if (prompts.size() > 1) out << "[" << i << "] ";
    out << c.texts[i] << (prompts.size() > 1 ? absl::StrCat(" (", FinishName(c.finish[i]), ")") : "") << "\n";
  }
}

}  // namespace

absl::Status RunGenerateCommand(const GenerateCommandOptions& o, std::ostream& out) {
  SEAM_ASSIGN_OR_RETURN(const std::vector<std::vector<int32_t>> prompts, Prompts(o));
  const v1::GenerateRequest request = Request(o, prompts);
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel = security::MakeChannel(o.security, o.addr);
  if (!channel.ok()) return channel.status();
  auto stub = v1::Coordinator::NewStub(*channel);
  auto context = ContextWithTimeout(o.timeout_s);
  Completions c(prompts.size());
  const grpc::Status status =
      o.stream ? CallStreaming(*stub, context.get(), request, o, c, out) : CallAll(*stub, context.get(), request, c);
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
                                   ": ", DescribeStatus(status), PlaintextHint(status, o.security.tls())),
                      status);
  }
  if (o.json) {
    PrintJson(o, prompts, request.request_id(), server_request_id, c, out);
  } else {
    PrintCompletions(o, prompts, c, out);
  }
  return absl::OkStatus();
}

}  // namespace seam::cli
