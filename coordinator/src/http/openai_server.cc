// OpenAiServer: cpp-httplib's Server (SSLServer with TLS), the bearer-token
// gate, and the routes.
#include "http/openai_server.h"

#include <atomic>
#include <thread>

#include <httplib.h>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "http/generation_handler.h"
#include "http/openai_response.h"
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
  std::unique_ptr<httplib::Server> server;
  int port = 0;
  std::thread thread;
};

namespace {

// The listen address's host and port; "" host means every interface.
absl::Status SplitListen(const std::string& listen, std::string* host, int* port) {
  const size_t colon = listen.rfind(':');
  if (colon == std::string::npos || !absl::SimpleAtoi(listen.substr(colon + 1), port) || *port < 0 ||
      *port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("--http-listen '", listen, "' is not HOST:PORT"));
  }
  *host = security::HostOfAddress(listen);
  if (host->empty()) *host = "0.0.0.0";
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<httplib::Server>> MakeServer(const OpenAiServerOptions& o) {
  const security::ServerSecurityOptions& s = o.security;
  if (!s.tls()) {
    if (!s.tls_key_file.empty() || !s.tls_client_ca_file.empty()) {
      return absl::InvalidArgumentError("--tls-key and --tls-client-ca need --tls-cert");
    }
    if (absl::Status plain = security::CheckPlaintextListen(o.listen, s.insecure); !plain.ok()) {
      return absl::Status(plain.code(), absl::StrCat("--http-listen: ", plain.message()));
    }
    if (!s.auth_token_file.empty() && !security::IsLoopbackAddress(o.listen)) {
      return absl::InvalidArgumentError(absl::StrCat("refusing to take a bearer token in plaintext HTTP on ",
                                                     o.listen, ": pass --tls-cert/--tls-key"));
    }
    return std::make_unique<httplib::Server>();
  }
  if (s.tls_key_file.empty()) return absl::InvalidArgumentError("--tls-cert needs --tls-key");
  // Read first, so that a missing file is named as gRPC's setup names it.
  for (const auto& [path, flag] : {std::pair{s.tls_cert_file, "--tls-cert"}, std::pair{s.tls_key_file, "--tls-key"}}) {
    if (absl::StatusOr<std::string> f = security::ReadFileForFlag(path, flag); !f.ok()) {
      return absl::InvalidArgumentError(f.status().message());
    }
  }
  auto server = std::make_unique<httplib::SSLServer>(
      s.tls_cert_file.c_str(), s.tls_key_file.c_str(),
      s.tls_client_ca_file.empty() ? nullptr : s.tls_client_ca_file.c_str());
  if (!server->is_valid()) {
    return absl::InvalidArgumentError(absl::StrCat("HTTP TLS: cannot use --tls-cert ", s.tls_cert_file,
                                                   " with --tls-key ", s.tls_key_file));
  }
  return server;
}

// OK when the request may pass: /health is open, everything else needs the token.
absl::Status Authenticate(const OpenAiServer::Impl& impl, const httplib::Request& request) {
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

void AddRoutes(OpenAiServer::Impl& impl) {
  httplib::Server& server = *impl.server;
  server.set_pre_routing_handler([&impl](const httplib::Request& request, httplib::Response& response) {
    if (absl::Status s = Authenticate(impl, request); !s.ok()) {
      SetError(response, s);
      response.set_header("WWW-Authenticate", "Bearer");
      return httplib::Server::HandlerResponse::Handled;
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });
  server.Get("/health", [&impl](const httplib::Request&, httplib::Response& response) {
    bool up = true;
    for (bool stage : impl.backend.driver->StagesUp()) up = up && stage;
    response.status = up ? 200 : 503;
    response.set_content(up ? R"({"status":"ok"})" : R"({"status":"unavailable"})", "application/json");
  });
  server.Get("/v1/models", [&impl](const httplib::Request&, httplib::Response& response) {
    const nlohmann::json model = ModelJson(impl.options.model_name, impl.created, impl.backend.limits);
    response.set_content(nlohmann::json{{"object", "list"}, {"data", {model}}}.dump(), "application/json");
  });
  auto generation = [&impl](bool chat) {
    return [&impl, chat](const httplib::Request& request, httplib::Response& response) {
      GenerationContext context{&impl.backend, impl.options.model_name};
      ServeGeneration(context, chat, request, response);
    };
  };
  server.Post("/v1/completions", generation(false));
  server.Post("/v1/chat/completions", generation(true));
  // Unknown paths and httplib's own refusals get an OpenAI error body too.
  server.set_error_handler([](const httplib::Request& request, httplib::Response& response) {
    if (!response.body.empty()) return;
    const absl::Status status =
        response.status == 404 ? absl::NotFoundError(absl::StrCat("no route ", request.method, " ", request.path))
        : response.status == 413 ? absl::InvalidArgumentError("the request body is too large")
                                 : absl::InvalidArgumentError(absl::StrCat("HTTP ", response.status));
    const int code = response.status;
    SetError(response, status);
    response.status = code;
  });
  server.set_exception_handler([](const httplib::Request&, httplib::Response& response, std::exception_ptr e) {
    std::string what = "unknown error";
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& ex) {
      what = ex.what();
    } catch (...) {
    }
    SetError(response, absl::InternalError(what));
  });
}

}  // namespace

OpenAiServer::OpenAiServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

absl::Status OpenAiServer::CheckOptions(const OpenAiServerOptions& options) {
  std::string host;
  int port = 0;
  if (absl::Status s = SplitListen(options.listen, &host, &port); !s.ok()) return s;
  if (!options.security.auth_token_file.empty()) {
    absl::StatusOr<std::string> token = security::ReadTokenFile(options.security.auth_token_file, "--auth-token-file");
    if (!token.ok()) return absl::InvalidArgumentError(token.status().message());
  }
  absl::StatusOr<std::unique_ptr<httplib::Server>> server = MakeServer(options);  // binds nothing
  return server.status();
}

absl::StatusOr<std::unique_ptr<OpenAiServer>> OpenAiServer::Start(const OpenAiServerOptions& options,
                                                                   const OpenAiBackend& backend) {
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  impl->backend = backend;
  impl->created = absl::ToUnixSeconds(absl::Now());
  if (!options.security.auth_token_file.empty()) {
    absl::StatusOr<std::string> token = security::ReadTokenFile(options.security.auth_token_file, "--auth-token-file");
    if (!token.ok()) return absl::InvalidArgumentError(token.status().message());
    impl->token = *token;
  }
  std::string host;
  int port = 0;
  if (absl::Status s = SplitListen(options.listen, &host, &port); !s.ok()) return s;
  absl::StatusOr<std::unique_ptr<httplib::Server>> server = MakeServer(options);
  if (!server.ok()) return server.status();
  impl->server = std::move(*server);
  const int threads = options.threads;
  impl->server->new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  impl->server->set_payload_max_length(options.max_body_bytes);
  impl->server->set_read_timeout(30, 0);
  AddRoutes(*impl);
  impl->port = port == 0 ? impl->server->bind_to_any_port(host) : (impl->server->bind_to_port(host, port) ? port : -1);
  if (impl->port <= 0) return absl::UnavailableError(absl::StrCat("cannot listen on --http-listen ", options.listen));
  httplib::Server* raw = impl->server.get();
  impl->thread = std::thread([raw] { raw->listen_after_bind(); });
  SEAM_LOG_INFO("OpenAI-compatible HTTP on {}://{}:{} (model '{}')", options.security.tls() ? "https" : "http", host,
                impl->port, options.model_name);
  return std::unique_ptr<OpenAiServer>(new OpenAiServer(std::move(impl)));
}

OpenAiServer::~OpenAiServer() { Stop(); }

int OpenAiServer::port() const { return impl_->port; }

void OpenAiServer::Stop() {
  if (impl_->server == nullptr) return;
  impl_->server->stop();
  if (impl_->thread.joinable()) impl_->thread.join();
  impl_->server.reset();
}

}  // namespace seam::coordinator::http
