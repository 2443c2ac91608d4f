// How a Status becomes an HTTP answer in the OpenAI style: the status code
// a client of the gRPC API would act on mapped to its HTTP equivalent, and a
// body {"error": {"message", "type", "code"}} where code is the gRPC code's
// name ("invalid_argument", "resource_exhausted", ...).
#pragma once

#include <string>

#include "absl/status/status.h"

namespace seam::coordinator::http {

// 400 INVALID_ARGUMENT / FAILED_PRECONDITION / OUT_OF_RANGE, 401
// UNAUTHENTICATED, 403 PERMISSION_DENIED, 404 NOT_FOUND, 429
// RESOURCE_EXHAUSTED (queue full, a microbatch over the stages' limit), 499
// CANCELLED, 503 UNAVAILABLE (the pipeline is down or shutting down), 504
// DEADLINE_EXCEEDED, 501 UNIMPLEMENTED, 500 otherwise.
int HttpStatusOf(absl::StatusCode code);

// OpenAI's error type of that status: invalid_request_error,
// authentication_error, permission_error, not_found_error, rate_limit_error,
// service_unavailable_error, timeout_error or server_error.
const char* ErrorTypeOf(absl::StatusCode code);

// The JSON body of an error answer (`status` must not be OK).
std::string ErrorBody(const absl::Status& status);

}  // namespace seam::coordinator::http
