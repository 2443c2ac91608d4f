// The status mapping of the HTTP front end.
#include "http/http_errors.h"

#include <nlohmann/json.hpp>

#include "absl/strings/ascii.h"

namespace seam::coordinator::http {

int HttpStatusOf(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kOk: return 200;
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kOutOfRange: return 400;
    case absl::StatusCode::kUnauthenticated: return 401;
    case absl::StatusCode::kPermissionDenied: return 403;
    case absl::StatusCode::kNotFound: return 404;
    case absl::StatusCode::kResourceExhausted: return 429;
    case absl::StatusCode::kCancelled: return 499;
    case absl::StatusCode::kUnimplemented: return 501;
    case absl::StatusCode::kUnavailable: return 503;
    case absl::StatusCode::kDeadlineExceeded: return 504;
    default: return 500;
  }
}

const char* ErrorTypeOf(absl::StatusCode code) {
  switch (HttpStatusOf(code)) {
    case 400: return "invalid_request_error";
    case 401: return "authentication_error";
    case 403: return "permission_error";
    case 404: return "not_found_error";
    case 429: return "rate_limit_error";
    case 503: return "service_unavailable_error";
    case 504: return "timeout_error";
    default: return "server_error";
  }
}

std::string ErrorBody(const absl::Status& status) {
  nlohmann::json error = {
      {"message", std::string(status.message())},
      {"type", ErrorTypeOf(status.code())},
      {"param", nullptr},
      {"code", absl::AsciiStrToLower(absl::StatusCodeToString(status.code()))},
  };
  return nlohmann::json{{"error", error}}.dump();
}

}  // namespace seam::coordinator::http
