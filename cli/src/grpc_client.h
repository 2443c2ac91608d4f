// Small helpers shared by the `seam` gRPC client commands: status code names,
// channels with a deadline, and the grpc.health.v1 check over a generic stub
// (the health proto is tiny; its bytes are written and read here).
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"

namespace seam::cli {

std::string GrpcCodeName(grpc::StatusCode code);

// "CODE_NAME: message", as the client commands print a failed call.
std::string DescribeStatus(const grpc::Status& status);

// A failed call as a command returns it: `message`, with the call's code
// through AfterFlags (UNAVAILABLE when the peer is down; a request the peer
// refused is FAILED_PRECONDITION, not a bad flag).
absl::Status CallFailed(const std::string& message, const grpc::Status& status);

// What a failed call made without TLS may mean: "" unless `status` is
// UNAVAILABLE and `tls` is false; then a hint that the server may serve TLS
// (seam serve does by default) and the flags it printed.
std::string PlaintextHint(const grpc::Status& status, bool tls);

std::unique_ptr<grpc::ClientContext> ContextWithTimeout(double seconds);

// grpc.health.v1.Health/Check for `service` ("" = the whole server): the
// ServingStatus name (SERVING, NOT_SERVING, ...), or the failed call's status.
grpc::Status CheckHealth(const std::shared_ptr<grpc::Channel>& channel, const std::string& service,
                         double timeout_s, std::string* serving_status);

}  // namespace seam::cli
