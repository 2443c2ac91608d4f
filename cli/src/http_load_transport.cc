// load_transport.h over the OpenAI-compatible HTTP API: cpp-httplib's
// client (HTTPS with OpenSSL), one per session thread, reading the
// server-sent events of a streamed /v1/completions as they arrive.
#include <httplib.h>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "in_flight_calls.h"
#include "load_transport.h"
#include "seam/security/secret_files.h"

namespace seam::cli {
namespace {

using Json = nlohmann::json;

double Since(LoadClock::time_point t0) { return std::chrono::duration<double>(LoadClock::now() - t0).count(); }

using ClientRegistry = InFlightCalls<httplib::Client>;

// Reads the events of one streamed answer as its bytes come.
class EventReader {
 public:
  EventReader(LoadClock::time_point t0, LoadAnswer* answer) : t0_(t0), answer_(answer) {}

  // False once an event could not be read (error() says why).
  bool Feed(const char* data, size_t n) {
    raw_.append(data, n);
    for (size_t end; (end = raw_.find("\n\n", consumed_)) != std::string::npos;) {
      const std::string event = raw_.substr(consumed_, end - consumed_);
      consumed_ = end + 2;
      if (!Event(event)) return false;
    }
    return true;
  }
  const std::string& raw() const { return raw_; }
  const std::string& error() const { return error_; }
  bool done() const { return done_; }
  bool finished() const { return finished_; }

 private:
  bool Event(const std::string& event) {
    if (event.rfind("data: ", 0) != 0) return true;  // comments, other fields
    const std::string data = event.substr(6);
    if (data == "[DONE]") return done_ = true;
    const Json j = Json::parse(data, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object()) return Fail("an event that is not a JSON object: " + data.substr(0, 200));
    if (j.contains("error")) return Fail("an error event: " + data.substr(0, 500));
    if (auto u = j.find("usage"); u != j.end() && u->is_object()) {
      answer_->output_tokens = u->value("completion_tokens", int64_t{0});
    }
    auto choices = j.find("choices");
    if (choices == j.end() || !choices->is_array() || choices->empty()) return true;
    const Json& choice = (*choices)[0];
    const auto text = choice.find("text");
    if (text != choice.end() && text->is_string() && !text->get<std::string>().empty()) {
      answer_->arrivals.push_back(TokenArrival{Since(t0_), 1});
    }
    if (auto f = choice.find("finish_reason"); f != choice.end() && !f->is_null()) finished_ = true;
    return true;
  }
  bool Fail(const std::string& why) {
    error_ = why;
    return false;
  }

  LoadClock::time_point t0_;
  LoadAnswer* answer_;
  std::string raw_, error_;
  size_t consumed_ = 0;
  bool done_ = false, finished_ = false;
};

struct HttpTarget {
  std::string base;  // "https://HOST:PORT" or "http://HOST:PORT"
  std::string ca_file, token;
};

class HttpLoadClient final : public LoadClient {
 public:
  HttpLoadClient(const HttpTarget& target, ClientRegistry* registry) : client_(target.base), registry_(registry) {
    if (!target.ca_file.empty()) {
      client_.set_ca_cert_path(target.ca_file.c_str());
      client_.enable_server_certificate_verification(true);
    }
    if (!target.token.empty()) client_.set_bearer_token_auth(target.token.c_str());
    client_.set_keep_alive(true);
    client_.set_tcp_nodelay(true);  // the request's header and body leave at once
    client_.set_connection_timeout(std::chrono::seconds(10));
  }

  absl::StatusOr<LoadAnswer> Send(const LoadRequest& request, LoadClock::time_point t0) override {
    const Json body = {{"prompt", request.prompt},  {"max_tokens", request.max_tokens}, {"temperature", 0},
                       {"ignore_eos", true},        {"stream", true},
                       {"stream_options", {{"include_usage", true}}}};
    LoadAnswer answer;
    answer.per_token = false;
    EventReader events(t0, &answer);
    const LoadClock::time_point deadline =
        LoadClock::now() + std::chrono::milliseconds(static_cast<int64_t>(request.timeout_s * 1000));
    client_.set_read_timeout(std::chrono::milliseconds(static_cast<int64_t>(request.timeout_s * 1000)));
    httplib::Request http;
    http.method = "POST";
    http.path = "/v1/completions";
    http.headers = {{"X-Request-Id", request.id}, {"Content-Type", "application/json"}};
    http.body = body.dump();
    bool late = false;
    http.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
      if (LoadClock::now() > deadline) return !(late = true);
      return events.Feed(data, n);
    };
    if (!registry_->Add(&client_)) return absl::CancelledError(absl::StrCat(request.id, ": cancelled"));
    httplib::Response response;
    httplib::Error error = httplib::Error::Success;
    const bool sent = client_.send(http, response, error);
    registry_->Remove(&client_);
    answer.end_seconds = Since(t0);
    return Finish(request, sent, error, response, events, late, std::move(answer));
  }

 private:
  absl::StatusOr<LoadAnswer> Finish(const LoadRequest& request, bool sent, httplib::Error error,
                                    const httplib::Response& response, const EventReader& events, bool late,
                                    LoadAnswer answer) {
    const std::string who = absl::StrCat(request.id, ": POST /v1/completions");
    if (late) return absl::DeadlineExceededError(absl::StrCat(who, ": no answer within ", request.timeout_s, " s"));
    if (registry_->cancelled()) return absl::CancelledError(absl::StrCat(who, ": cancelled"));
    if (!events.error().empty()) return absl::InternalError(absl::StrCat(who, ": ", events.error()));
    if (!sent) return absl::UnavailableError(absl::StrCat(who, ": ", httplib::to_string(error)));
    if (response.status != 200) {
      return absl::InternalError(absl::StrCat(who, ": HTTP ", response.status, ": ", events.raw().substr(0, 500)));
    }
    if (!events.done() || !events.finished()) {
      return absl::InternalError(absl::StrCat(who, ": the stream ended before its last chunk and [DONE]"));
    }
    return answer;
  }

  httplib::Client client_;
  ClientRegistry* registry_;
};

class HttpLoadTransport final : public LoadTransport {
 public:
  explicit HttpLoadTransport(HttpTarget target)
      : target_(std::move(target)), registry_([](httplib::Client* client) { client->stop(); }) {}
  std::string name() const override { return "http"; }
  std::unique_ptr<LoadClient> NewClient() override { return std::make_unique<HttpLoadClient>(target_, &registry_); }
  void CancelAll() override { registry_.CancelAll(); }

 private:
  HttpTarget target_;
  ClientRegistry registry_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<LoadTransport>> MakeHttpLoadTransport(const std::string& address,
                                                                    const security::ClientSecurityOptions& security) {
  if (!security.tls_client_cert_file.empty()) {
    return absl::InvalidArgumentError("the HTTP API takes no client certificate: leave out --tls-client-cert");
  }
  HttpTarget target;
  target.base = absl::StrCat(security.tls() ? "https://" : "http://", address);
  target.ca_file = security.tls_ca_file;
  if (!security.auth_token_file.empty()) {
    absl::StatusOr<std::string> token = security::ReadTokenFile(security.auth_token_file, "--auth-token-file");
    if (!token.ok()) return token.status();
    target.token = *token;
  }
  return std::unique_ptr<LoadTransport>(new HttpLoadTransport(std::move(target)));
}

}  // namespace seam::cli
