// Serving one generation request over HTTP through the pipeline driver.
#include "http/generation_handler.h"

#include <chrono>
#include <memory>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "http/http_call.h"
#include "http/http_errors.h"
#include "http/openai_response.h"
#include "seam/core/logging.h"

namespace seam::coordinator::http {
namespace {

// The state of one streamed answer, kept by the chunked content provider.
struct StreamState {
  std::shared_ptr<HttpCall> call;
  LogFields identity;  // RequestLogFields of the call
  OpenAiRequest request;
  AnswerHeader header;
  const ModelText* text = nullptr;
  std::vector<bool> role_sent;
  std::vector<int64_t> text_offset;         // per choice: characters sent (completions' log-probs)
  std::optional<HttpCall::Progress> first;  // taken before the answer started
  int64_t completion_tokens = 0;
};

// Writes the chunks of `p`; false when the client is gone.
bool WriteProgress(StreamState& s, const HttpCall::Progress& p, http_server::DataSink& sink) {
  std::string out;
  for (size_t i = 0; i < p.new_tokens.size(); ++i) {
    s.completion_tokens += static_cast<int64_t>(p.new_tokens[i].size());
    ChoiceOutput part{p.new_text[i], p.new_logprobs[i], p.finished[i]};
    // A chat's first chunk names the role, even before any text is whole.
    const bool role = s.request.chat && !s.role_sent[i] && (!p.new_tokens[i].empty() || p.finished[i]);
    if (part.text.empty() && part.logprobs.empty() && !part.finish && !role) continue;
    if (role) s.role_sent[i] = true;
    out += SseEvent(
        ChunkJson(s.request, s.header, static_cast<int>(i), part, role, s.text, &s.text_offset[i]).dump());
  }
  return out.empty() || sink.write(out.data(), out.size());
}

bool StreamMore(StreamState& s, http_server::DataSink& sink) {
  HttpCall::Progress p;
  if (s.first) {
    p = std::move(*s.first);
    s.first.reset();
  } else {
    p = s.call->Take(std::chrono::milliseconds(200));
  }
  if ((sink.is_writable && !sink.is_writable()) || !WriteProgress(s, p, sink)) {
    ScopedLogFields scope(s.identity);
    SEAM_LOG_INFO("HTTP client went away mid-stream; cancelling the request");
    s.call->Cancel();
    return false;
  }
  if (!p.done) return true;
  std::string out;
  if (!p.status.ok()) {
    out += SseEvent(ErrorBody(p.status));
  } else if (s.request.include_usage) {
    out += SseEvent(UsageChunkJson(s.request, s.header, s.completion_tokens).dump());
  }
  out += SseEvent("[DONE]");
  sink.write(out.data(), out.size());
  sink.done();
  return true;
}

// The observer of a call refused before the driver: nothing to pass on.
class NoObserver final : public CallObserver {
 public:
  void OnToken(int, const TokenOutput&) override {}
  void OnSequenceFinished(int, FinishReason, const std::string&) override {}
  void OnScore(int, std::vector<float>) override {}
  void OnDone(const absl::Status&) override {}
  bool Cancelled() const override { return false; }
};
NoObserver kNoObserver;

// An answer refused before it reached the driver: counted as a failed
// request (as a refused gRPC call is), logged, and answered.
void Refuse(const OpenAiBackend& backend, const LogFields& identity, const absl::Status& status,
            http_server::Response& response) {
  auto* metered = new MeteredCall(&kNoObserver, backend.metrics, identity, "http", {}, false);
  metered->OnDone(status);  // deletes it
  SetError(response, status);
}

// The non-streamed answer, once the driver is done with the call.
void AnswerWhole(HttpCall& call, const OpenAiRequest& request, const AnswerHeader& header, const ModelText* text,
                 http_server::Response& response) {
  const size_t sequences = static_cast<size_t>(request.generate.prompts_size());
  std::vector<ChoiceOutput> choices(sequences);
  int64_t completion_tokens = 0;
  absl::Status status;
  for (bool done = false; !done;) {
    HttpCall::Progress p = call.Take();
    for (size_t i = 0; i < sequences; ++i) {
      completion_tokens += static_cast<int64_t>(p.new_tokens[i].size());
      choices[i].text += p.new_text[i];
      choices[i].logprobs.insert(choices[i].logprobs.end(), p.new_logprobs[i].begin(), p.new_logprobs[i].end());
      if (p.finished[i]) choices[i].finish = p.finished[i];
    }
    done = p.done;
    status = p.status;
  }
  if (!status.ok()) return SetError(response, status);
  response.set_content(CompletionJson(request, header, choices, completion_tokens, text).dump(), "application/json");
}

}  // namespace

void SetError(http_server::Response& response, const absl::Status& status) {
  response.status = HttpStatusOf(status.code());
  response.set_content(ErrorBody(status), "application/json");
}

void ServeGeneration(const GenerationContext& context, bool chat, const http_server::Request& http_request,
                     http_server::Response& response) {
  const OpenAiBackend& backend = *context.backend;
  const std::string server_id = NewServerRequestId();
  const LogFields identity =
      RequestLogFields(server_id, http_request.get_header_value(kClientRequestIdHeader),
                       static_cast<size_t>(backend.limits.max_request_id_bytes));
  response.set_header(kServerRequestIdHeader, server_id);
  if (!identity[1].second.empty()) response.set_header(kClientRequestIdHeader, identity[1].second);
  AnswerHeader header;
  header.id = absl::StrCat(chat ? "chatcmpl-" : "cmpl-", server_id);
  header.created = absl::ToUnixSeconds(absl::Now());
  header.model = context.model_name;
  // Validation messages name the call by the server's id, as the driver's do.
  absl::StatusOr<OpenAiRequest> parsed =
      ParseOpenAiRequest(http_request.body, chat, server_id, backend.text, backend.limits);
  if (!parsed.ok()) return Refuse(backend, identity, parsed.status(), response);
  if (!parsed->model.empty() && parsed->model != context.model_name) {
    return Refuse(backend, identity,
                  absl::NotFoundError(absl::StrCat("the model '", parsed->model, "' does not exist; this server serves '",
                                                   context.model_name, "'")),
                  response);
  }
  if (absl::Status s = ValidateGenerateRequest(parsed->generate, backend.limits); !s.ok()) {
    return Refuse(backend, identity, s, response);
  }
  if (absl::Status s = ValidateTextSampling(parsed->generate, backend.text != nullptr); !s.ok()) {
    return Refuse(backend, identity, s, response);
  }
  const int sequences = parsed->generate.prompts_size();
  std::shared_ptr<HttpCall> call = HttpCall::Make(sequences);
  DriverCall driver_call;
  driver_call.identity = RequestIdentity{server_id, identity[1].second};  // the server's names it past here
  driver_call.text = TextStreams(backend.text);
  for (const v1::TokenSequence& p : parsed->generate.prompts()) {
    driver_call.prompts.emplace_back(p.token_ids().begin(), p.token_ids().end());
  }
  std::vector<int> prompt_lengths;
  for (const auto& p : driver_call.prompts) prompt_lengths.push_back(static_cast<int>(p.size()));
  driver_call.sampling = parsed->generate.sampling();
  driver_call.cache_salt = parsed->generate.cache_salt();
  driver_call.sampling.set_max_new_tokens(
      static_cast<uint32_t>(ResolvedMaxNewTokens(parsed->generate.sampling(), backend.limits)));
  // Metered as gRPC calls are: token counters, latency histograms, the
  // success/failure counters and the one completion line. The MeteredCall
  // deletes itself after passing OnDone on to `call`.
  driver_call.observer = new MeteredCall(call.get(), backend.metrics, identity, "http", std::move(prompt_lengths), false);
  backend.driver->Submit(std::move(driver_call));

  if (!parsed->stream) return AnswerWhole(*call, *parsed, header, backend.text, response);
  // Streaming: the status line waits for the first news, so that a call the
  // driver refuses at once (queue full, pipeline down) gets its HTTP status.
  HttpCall::Progress first = call->Take();
  if (first.done && !first.status.ok()) return SetError(response, first.status);
  auto state = std::make_shared<StreamState>();
  state->call = call;
  state->identity = identity;
  state->request = std::move(*parsed);
  state->header = header;
  state->text = backend.text;
  state->role_sent.assign(sequences, false);
  state->text_offset.assign(sequences, 0);
  state->first = std::move(first);
  response.set_header("Cache-Control", "no-cache");
  response.set_chunked_content_provider(
      "text/event-stream", [state](size_t, http_server::DataSink& sink) { return StreamMore(*state, sink); },
      [call](bool success) {
        if (!success) call->Cancel();
      });
}

}  // namespace seam::coordinator::http
