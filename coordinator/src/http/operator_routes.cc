// OperatorRoutes (operator_routes.h).
#include "http/operator_routes.h"

#include <set>

#include "absl/strings/str_cat.h"
#include "http/generation_handler.h"
#include "http/openai_response.h"
#include "http/request_json.h"
#include "seam/metrics/metrics_endpoint.h"

namespace seam::coordinator::http {
namespace {

constexpr char kModelsPrefix[] = "/v1/models/";

// The body as a JSON object holding only `allowed` fields; INVALID_ARGUMENT naming what is wrong.
absl::StatusOr<nlohmann::ordered_json> BodyObject(const http_server::Request& request, const OpenAiBackend& backend,
                                                  const std::set<std::string>& allowed) {
  absl::StatusOr<nlohmann::ordered_json> body = ParseBoundedJson(request.body, RequestJsonBounds(backend.limits));
  if (!body.ok()) return body.status();
  if (!body->is_object()) return absl::InvalidArgumentError("the request body must be a JSON object");
  for (const auto& [key, value] : body->items()) {
    if (allowed.count(key) == 0) {
      return absl::InvalidArgumentError(absl::StrCat("'", key, "' is not supported by ", request.path));
    }
  }
  return body;
}

// A "model" field that names another model: NOT_FOUND as /v1/completions says it.
absl::Status CheckModel(const nlohmann::ordered_json& body, const std::string& model_name) {
  if (!body.contains("model") || body["model"].is_null()) return absl::OkStatus();
  if (!body["model"].is_string() || body["model"].get<std::string>() != model_name) {
    return absl::NotFoundError(absl::StrCat("the model '", body["model"].dump(), "' does not exist; this server "
                                            "serves '", model_name, "'"));
  }
  return absl::OkStatus();
}

absl::StatusOr<nlohmann::json> Tokenize(const nlohmann::ordered_json& body, const OpenAiBackend& b) {
  if (!body.contains("prompt") || !body["prompt"].is_string()) {
    return absl::InvalidArgumentError("'prompt' must be a string");
  }
  bool special = true;
  if (body.contains("add_special_tokens")) {
    if (!body["add_special_tokens"].is_boolean()) return absl::InvalidArgumentError("'add_special_tokens' must be a boolean");
    special = body["add_special_tokens"].get<bool>();
  }
  const std::vector<int32_t> ids = b.text->Encode(body["prompt"].get<std::string>(), special);
  return nlohmann::json{{"count", ids.size()}, {"max_model_len", b.limits.max_context}, {"tokens", ids}};
}

absl::StatusOr<nlohmann::json> Detokenize(const nlohmann::ordered_json& body, const OpenAiBackend& b) {
  if (!body.contains("tokens") || !body["tokens"].is_array()) {
    return absl::InvalidArgumentError("'tokens' must be an array of token ids");
  }
  std::vector<int32_t> ids;
  for (const auto& t : body["tokens"]) {
    if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= b.limits.vocab_size) {
      return absl::InvalidArgumentError(
          absl::StrCat("'tokens' holds ", t.dump(), ": token ids are integers in [0, ", b.limits.vocab_size, ")"));
    }
    ids.push_back(static_cast<int32_t>(t.get<int64_t>()));
  }
  return nlohmann::json{{"prompt", b.text->Decode(ids)}};
}

// A POST route answering `answer(body)` for bodies of `allowed` fields.
http_server::Route TextRoute(const std::string& path, std::set<std::string> allowed, const std::string& model_name,
                             const OpenAiBackend* backend,
                             absl::StatusOr<nlohmann::json> (*answer)(const nlohmann::ordered_json&,
                                                                      const OpenAiBackend&)) {
  return {"POST", path, [=](const http_server::Request& request, http_server::Response& response) {
            absl::StatusOr<nlohmann::ordered_json> body = BodyObject(request, *backend, allowed);
            absl::Status ok = body.ok() ? CheckModel(*body, model_name) : body.status();
            if (ok.ok() && backend->text == nullptr) {
              ok = absl::InvalidArgumentError(absl::StrCat(request.path, " needs the model's tokenizer.json, which "
                                                           "this checkpoint lacks"));
            }
            absl::StatusOr<nlohmann::json> answered = ok.ok() ? answer(*body, *backend) : ok;
            if (!answered.ok()) return SetError(response, answered.status());
            response.set_content(answered->dump(), "application/json");
          }};
}

}  // namespace

std::vector<http_server::Route> OperatorRoutes(const std::string& model_name, const int64_t* created,
                                               const OpenAiBackend* backend) {
  std::vector<http_server::Route> routes = {
      TextRoute("/tokenize", {"model", "prompt", "add_special_tokens"}, model_name, backend, &Tokenize),
      TextRoute("/detokenize", {"model", "tokens"}, model_name, backend, &Detokenize),
      {"GET", "/version",
       [](const http_server::Request&, http_server::Response& response) {
         response.set_content(nlohmann::json{{"version", SEAM_PROJECT_VERSION}}.dump(), "application/json");
       }},
      {"GET", std::string(kModelsPrefix) + "*",
       [=](const http_server::Request& request, http_server::Response& response) {
         const std::string id = request.path.substr(sizeof(kModelsPrefix) - 1);
         if (id != model_name) {
           return SetError(response, absl::NotFoundError(absl::StrCat("the model '", id, "' does not exist; this "
                                                                      "server serves '", model_name, "'")));
         }
         response.set_content(ModelJson(model_name, *created, backend->limits).dump(), "application/json");
       }},
  };
  if (backend->metrics_page != nullptr) {
    routes.push_back({"GET", "/metrics", [backend](const http_server::Request&, http_server::Response& response) {
                        response.set_content(backend->metrics_page->Render(), "text/plain; version=0.0.4");
                      }});
  }
  return routes;
}

}  // namespace seam::coordinator::http
