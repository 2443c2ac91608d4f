// grpc_client.h: code names, deadlines and the generic health check.
#include "grpc_client.h"

#include <future>
#include <vector>

#include <grpcpp/generic/generic_stub.h>

#include "command_status.h"

namespace seam::cli {

std::string GrpcCodeName(grpc::StatusCode code) {
  static const char* const kNames[] = {"OK",
                                       "CANCELLED",
                                       "UNKNOWN",
                                       "INVALID_ARGUMENT",
                                       "DEADLINE_EXCEEDED",
                                       "NOT_FOUND",
                                       "ALREADY_EXISTS",
                                       "PERMISSION_DENIED",
                                       "RESOURCE_EXHAUSTED",
                                       "FAILED_PRECONDITION",
                                       "ABORTED",
                                       "OUT_OF_RANGE",
                                       "UNIMPLEMENTED",
                                       "INTERNAL",
                                       "UNAVAILABLE",
                                       "DATA_LOSS",
                                       "UNAUTHENTICATED"};
  const int c = static_cast<int>(code);
  return c >= 0 && c < 17 ? kNames[c] : "CODE_" + std::to_string(c);
}

std::string DescribeStatus(const grpc::Status& status) {
  return GrpcCodeName(status.error_code()) + ": " + status.error_message();
}

absl::Status CallFailed(const std::string& message, const grpc::Status& status) {
  // gRPC's and absl's status codes are the same numbers.
  return absl::Status(AfterFlags(static_cast<absl::StatusCode>(status.error_code())), message);
}

std::string PlaintextHint(const grpc::Status& status, bool tls) {
  if (tls || status.error_code() != grpc::StatusCode::UNAVAILABLE) return "";
  return " (this call was plaintext: a server that serves TLS, as seam serve does by default, closes it; pass "
         "--tls-ca and --auth-token-file as seam serve printed them)";
}

std::unique_ptr<grpc::ClientContext> ContextWithTimeout(double seconds) {
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(std::chrono::system_clock::now() +
                        std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000)));
  return context;
}

grpc::Status CheckHealth(const std::shared_ptr<grpc::Channel>& channel, const std::string& service,
                         double timeout_s, std::string* serving_status) {
  // HealthCheckRequest { string service = 1; }
  std::string request_bytes;
  if (!service.empty()) {
    request_bytes.push_back(0x0a);
    request_bytes.push_back(static_cast<char>(service.size()));  // names are < 128 bytes
    request_bytes += service;
  }
  grpc::Slice slice(request_bytes);
  grpc::ByteBuffer request(&slice, 1), response;
  grpc::GenericStub generic(channel);
  auto context = ContextWithTimeout(timeout_s);
  std::promise<grpc::Status> done;
  generic.UnaryCall(context.get(), "/grpc.health.v1.Health/Check", grpc::StubOptions(), &request, &response,
                    [&done](grpc::Status s) { done.set_value(std::move(s)); });
  const grpc::Status status = done.get_future().get();
  if (!status.ok()) return status;
  std::vector<grpc::Slice> slices;
  if (!response.Dump(&slices).ok()) return grpc::Status(grpc::StatusCode::INTERNAL, "unreadable health response");
  std::string bytes;
  for (const grpc::Slice& s : slices) bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  // HealthCheckResponse { ServingStatus status = 1; }; an absent field is UNKNOWN (0).
  const int value = bytes.size() >= 2 && bytes[0] == 0x08 ? bytes[1] : 0;
  static const char* const kStatus[] = {"UNKNOWN", "SERVING", "NOT_SERVING", "SERVICE_UNKNOWN"};
  *serving_status = value >= 0 && value < 4 ? kStatus[value] : "STATUS_" + std::to_string(value);
  return grpc::Status::OK;
}

}  // namespace seam::cli
