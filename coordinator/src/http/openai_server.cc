// OpenAiServer: seam's HTTP listener with the bearer-token gate on request
// heads, OpenAI-shaped refusals, and the routes.
#include "http/openai_server.h"

#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "http/generation_handler.h"
#include "http/operator_routes.h"
#include "http/openai_response.h"
#include "seam/http_server/http_server.h"
#include "seam/core/logging.h"
#include "seam/security/bearer_token.h"
#include "seam/security/listen_address.h"
#include "seam/security/secret_files.h"

namespace seam::coordinator::http {

struct OpenAiServer::Impl {
  OpenAiServerOptions options;
  OpenAiBackend backend;
  std::string token;  // empty: no token asked
  int64_t created = 0;
  std::unique_ptr<http_server::Server> server;
  int port = 0;
};

namespace {

// The checks of the listen address and the plaintext rule (TLS files are read by the listener).
absl::Status CheckListen(const OpenAiServerOptions& o) {
  const size_t colon = o.listen.rfind(':');
  int port = 0;
  if (colon == std::string::npos || !absl::SimpleAtoi(o.listen.substr(colon + 1), &port) || port < 0 ||
      port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("--http-listen '", o.listen, "' is not HOST:PORT"));
  }
  const security::ServerSecurityOptions& s = o.security;
  if (s.tls()) {
    if (s.tls_key_file.empty()) return absl::InvalidArgumentError("--tls-cert needs --tls-key");
    // Read first, so that a missing file is named as gRPC's setup names it.
    for (const auto& [path, flag] :
         {std::pair{s.tls_cert_file, "--tls-cert"}, std::pair{s.tls_key_file, "--tls-key"}}) {
      if (absl::StatusOr<std::string> f = security::ReadFileForFlag(path, flag); !f.ok()) {
        return absl::InvalidArgumentError(f.status().message());
      }
    }
    return absl::OkStatus();
  }
  if (!s.tls_key_file.empty() || !s.tls_client_ca_file.empty()) {
    return absl::InvalidArgumentError("--tls-key and --tls-client-ca need --tls-cert");
  }
  if (absl::Status plain = security::CheckPlaintextListen(o.listen, s.insecure); !plain.ok()) {
    return absl::Status(plain.code(), absl::StrCat("--http-listen: ", plain.message()));
  }
  if (!s.auth_token_file.empty() && !security::IsLoopbackAddress(o.listen)) {
    return absl::InvalidArgumentError(absl::StrCat("refusing to take a bearer token in plaintext HTTP on ", o.listen,
                                                   ": pass --tls-cert/--tls-key"));
  }
  return absl::OkStatus();
}

// OK when the request may pass: /health is open, everything else needs the token.
absl::Status Authenticate(const OpenAiServer::Impl& impl, const http_server::Request& request) {
  if (impl.token.empty() || request.path == "/health") return absl::OkStatus();
  const std::string header = request.get_header_value("Authorization");
  constexpr absl::string_view kBearer = "Bearer ";
  if (!absl::StartsWith(header, kBearer)) {
    return absl::UnauthenticatedError("this server needs 'Authorization: Bearer <token>'");
  }
  if (!security::TokenMatches(absl::string_view(header).substr(kBearer.size()), impl.token)) {
    return absl::UnauthenticatedError("the bearer token is not the right one");
  }
  return absl::OkStatus();
}

// The listener's own refusals (no route, body too large, shutting down) as OpenAI error bodies.
void ErrorAnswer(const std::string& message, http_server::Response& response) {
  const int code = response.status;
  const absl::Status status = code == 404   ? absl::NotFoundError(message)
                              : code == 503 ? absl::UnavailableError(message)
                              : code == 500 ? absl::InternalError(message)
                                            : absl::InvalidArgumentError(message);
  SetError(response, status);
  response.status = code;
}

std::vector<http_server::Route> Routes(OpenAiServer::Impl& impl) {
  auto health = [&impl](const http_server::Request&, http_server::Response& response) {
    bool up = true;
    for (bool stage : impl.backend.driver->StagesUp()) up = up && stage;
    response.status = up ? 200 : 503;
    response.set_content(up ? R"({"status":"ok"})" : R"({"status":"unavailable"})", "application/json");
  };
  auto models = [&impl](const http_server::Request&, http_server::Response& response) {
    const nlohmann::json model = ModelJson(impl.options.model_name, impl.created, impl.backend.limits);
    response.set_content(nlohmann::json{{"object", "list"}, {"data", {model}}}.dump(), "application/json");
  };
  auto generation = [&impl](bool chat) {
    return [&impl, chat](const http_server::Request& request, http_server::Response& response) {
      GenerationContext context{&impl.backend, impl.options.model_name};
      ServeGeneration(context, chat, request, response);
    };
  };
  std::vector<http_server::Route> routes = {{"GET", "/health", health},
                                            {"GET", "/v1/models", models},
                                            {"POST", "/v1/completions", generation(false)},
                                            {"POST", "/v1/chat/completions", generation(true)}};
  for (http_server::Route& r : OperatorRoutes(impl.options.model_name, &impl.created, &impl.backend)) {
    routes.push_back(std::move(r));
  }
  return routes;
}

http_server::ServerOptions ListenerOptions(OpenAiServer::Impl& impl) {
  const OpenAiServerOptions& o = impl.options;
  http_server::ServerOptions l;
  l.listen = o.listen;
  l.name = "--http-listen";
  if (o.security.tls()) {
    l.tls_cert_file = o.security.tls_cert_file;
    l.tls_key_file = o.security.tls_key_file;
    l.tls_client_ca_file = o.security.tls_client_ca_file;
  }
  l.max_body_bytes = o.max_body_bytes;
  l.workers = o.threads;
  l.max_connections = o.max_connections;
  l.max_connections_per_address = o.max_connections_per_address;
  l.head_timeout = o.head_timeout;
  // The token is checked on the head: a request without it never has its body read.
  l.gate = [&impl](const http_server::Request& head, http_server::Response& refusal) {
    absl::Status s = Authenticate(impl, head);
    if (s.ok()) return true;
    SetError(refusal, s);
    refusal.set_header("WWW-Authenticate", "Bearer");
    return false;
  };
  l.error_answer = &ErrorAnswer;
  return l;
}

}  // namespace

OpenAiServer::OpenAiServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

absl::Status OpenAiServer::CheckOptions(const OpenAiServerOptions& options) {
  if (absl::Status s = CheckListen(options); !s.ok()) return s;
  if (!options.security.auth_token_file.empty()) {
    absl::StatusOr<std::string> token = security::ReadTokenFile(options.security.auth_token_file, "--auth-token-file");
    if (!token.ok()) return absl::InvalidArgumentError(token.status().message());
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<OpenAiServer>> OpenAiServer::Start(const OpenAiServerOptions& options,
                                                                   const OpenAiBackend& backend) {
  if (absl::Status s = CheckOptions(options); !s.ok()) return s;
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  impl->backend = backend;
  impl->created = absl::ToUnixSeconds(absl::Now());
  if (!options.security.auth_token_file.empty()) {
    impl->token = *security::ReadTokenFile(options.security.auth_token_file, "--auth-token-file");
  }
  absl::StatusOr<std::unique_ptr<http_server::Server>> server =
      http_server::Server::Start(ListenerOptions(*impl), Routes(*impl));
  if (!server.ok()) return server.status();
  impl->server = std::move(*server);
  impl->port = impl->server->port();
  SEAM_LOG_INFO("OpenAI-compatible HTTP on {}://{} (port {}, model '{}')", options.security.tls() ? "https" : "http",
                options.listen, impl->server->port(), options.model_name);
  return std::unique_ptr<OpenAiServer>(new OpenAiServer(std::move(impl)));
}

OpenAiServer::~OpenAiServer() { Stop(); }

int OpenAiServer::port() const { return impl_->port; }

void OpenAiServer::Stop() {
  if (impl_->server == nullptr) return;
  impl_->server->Stop();
  impl_->server.reset();
}

}  // namespace seam::coordinator::http
