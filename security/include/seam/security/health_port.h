// A plaintext port serving grpc.health.v1 and nothing else, beside a TLS
// server, for probes that cannot speak TLS (the kubelet's gRPC probe). It
// exposes only SERVING / NOT_SERVING, so it may listen on any interface.
#pragma once

#include <memory>
#include <string>

#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>

#include "absl/status/statusor.h"

namespace seam::security {

class HealthPort {
 public:
  // UNAVAILABLE when `listen` cannot be bound.
  static absl::StatusOr<std::unique_ptr<HealthPort>> Start(const std::string& listen);
  ~HealthPort();

  int port() const { return port_; }
  // Thread-safe: the overall status and that of `service`.
  void SetServing(const std::string& service, bool serving);

 private:
  HealthPort() = default;
  int port_ = 0;
  grpc::CallbackGenericService unimplemented_;  // every other method
  std::unique_ptr<grpc::Server> server_;
};

}  // namespace seam::security
