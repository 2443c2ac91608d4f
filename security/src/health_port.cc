// The health-only plaintext server.
#include "seam/security/health_port.h"

#include "absl/strings/str_cat.h"
#include "seam/security/listen_port.h"

namespace seam::security {

absl::StatusOr<std::unique_ptr<HealthPort>> HealthPort::Start(const std::string& listen) {
  std::unique_ptr<HealthPort> self(new HealthPort());
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  ListenExclusively(builder);
  builder.AddListeningPort(listen, grpc::InsecureServerCredentials(), &self->port_);
  builder.RegisterCallbackGenericService(&self->unimplemented_);
  self->server_ = builder.BuildAndStart();
  if (self->server_ == nullptr || self->port_ == 0) return ListenFailure(listen, "--health-listen");
  self->SetServing("", false);
  return self;
}

HealthPort::~HealthPort() {
  if (server_ != nullptr) server_->Shutdown(std::chrono::system_clock::now());
}

void HealthPort::SetServing(const std::string& service, bool serving) {
  grpc::HealthCheckServiceInterface* health = server_->GetHealthCheckService();
  health->SetServingStatus(serving);
  if (!service.empty()) health->SetServingStatus(service, serving);
}

}  // namespace seam::security
