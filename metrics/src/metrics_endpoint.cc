// The /metrics listener: the loopback rule, then cpp-httplib serving the
// registry's text exposition.
#include "seam/metrics/metrics_endpoint.h"

#include <sstream>

#include <httplib.h>
#include <prometheus/text_serializer.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "seam/security/listen_address.h"

namespace seam::metrics {

absl::StatusOr<std::unique_ptr<MetricsEndpoint>> MetricsEndpoint::Start(const MetricsEndpointOptions& o) {
  const bool tls = !o.tls_cert_file.empty() || !o.tls_key_file.empty();
  if (tls && (o.tls_cert_file.empty() || o.tls_key_file.empty())) {
    return absl::FailedPreconditionError("metrics over TLS needs both a certificate and its key");
  }
  if (!tls && !o.insecure && !security::IsLoopbackAddress(o.listen)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "refusing to serve metrics on ", o.listen,
        " over plain HTTP: give the process a TLS certificate and key (--tls-cert/--tls-key), use a loopback "
        "address, or pass --insecure"));
  }
  const size_t colon = o.listen.rfind(':');
  int port = -1;
  if (colon == std::string::npos || !absl::SimpleAtoi(o.listen.substr(colon + 1), &port) || port < 0 ||
      port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("metrics address '", o.listen, "': expected host:port"));
  }
  std::string host = security::HostOfAddress(o.listen);
  if (host.empty()) host = "0.0.0.0";
  std::unique_ptr<MetricsEndpoint> e(new MetricsEndpoint());
  e->registry_ = std::make_shared<prometheus::Registry>();
  if (tls) {
    e->server_ = std::make_unique<httplib::SSLServer>(o.tls_cert_file.c_str(), o.tls_key_file.c_str());
  } else {
    e->server_ = std::make_unique<httplib::Server>();
  }
  if (!e->server_->is_valid()) {
    return absl::UnavailableError(absl::StrCat("cannot load the metrics TLS certificate ", o.tls_cert_file));
  }
  MetricsEndpoint* self = e.get();
  e->server_->Get("/metrics", [self](const httplib::Request&, httplib::Response& res) {
    res.set_content(self->Render(), "text/plain; version=0.0.4; charset=utf-8");
  });
  e->port_ = port == 0 ? e->server_->bind_to_any_port(host) : (e->server_->bind_to_port(host, port) ? port : -1);
  if (e->port_ <= 0) return absl::UnavailableError(absl::StrCat("cannot serve metrics on ", o.listen));
  e->thread_ = std::thread([self] { self->server_->listen_after_bind(); });
  return e;
}

MetricsEndpoint::~MetricsEndpoint() {
  if (server_ != nullptr) server_->stop();
  if (thread_.joinable()) thread_.join();
}

void MetricsEndpoint::AddCollectable(std::shared_ptr<prometheus::Collectable> collectable) {
  std::lock_guard<std::mutex> lock(mu_);
  collectables_.push_back(std::move(collectable));
}

std::string MetricsEndpoint::Render() const {
  std::vector<prometheus::MetricFamily> families = registry_->Collect();
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& c : collectables_) {
      std::vector<prometheus::MetricFamily> more = c->Collect();
      families.insert(families.end(), std::make_move_iterator(more.begin()), std::make_move_iterator(more.end()));
    }
  }
  return prometheus::TextSerializer().Serialize(families);
}

prometheus::Histogram::BucketBoundaries TimeToFirstTokenBuckets() {
  return {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0,
          80.0, 160.0, 640.0, 2560.0};
}

prometheus::Histogram::BucketBoundaries InterTokenLatencyBuckets() {
  return {0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0};
}

prometheus::Histogram::BucketBoundaries RequestLatencyBuckets() {
  return {0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0,
          960.0, 1920.0, 7680.0};
}

prometheus::Histogram::BucketBoundaries StepTimeBuckets() {
  return {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0};
}

}  // namespace seam::metrics
