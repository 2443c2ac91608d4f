// The /metrics listener: the loopback rule, then seam's HTTP listener
// serving the registry's text exposition.
#include "seam/metrics/metrics_endpoint.h"

#include <prometheus/text_serializer.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "seam/http_server/http_server.h"
#include "seam/security/listen_address.h"

namespace seam::metrics {

absl::StatusOr<std::unique_ptr<MetricsEndpoint>> MetricsEndpoint::Start(const MetricsEndpointOptions& o) {
  if (o.listen.empty()) {  // a registry whose Render another listener serves
    std::unique_ptr<MetricsEndpoint> e(new MetricsEndpoint());
    e->registry_ = std::make_shared<prometheus::Registry>();
    e->constant_labels_ = o.constant_labels;
    return e;
  }
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
  std::unique_ptr<MetricsEndpoint> e(new MetricsEndpoint());
  e->registry_ = std::make_shared<prometheus::Registry>();
  e->constant_labels_ = o.constant_labels;
  MetricsEndpoint* self = e.get();
  http_server::ServerOptions options;
  options.listen = o.listen;
  options.name = "--metrics-listen";
  options.tls_cert_file = o.tls_cert_file;
  options.tls_key_file = o.tls_key_file;
  options.max_body_bytes = 0;  // a scrape is a GET
  options.workers = 2;
  options.io_threads = 1;
  options.max_connections = 64;
  options.max_connections_per_address = 16;
  std::vector<http_server::Route> routes = {
      {"GET", "/metrics", [self](const http_server::Request&, http_server::Response& res) {
         res.set_content(self->Render(), "text/plain; version=0.0.4; charset=utf-8");
       }}};
  absl::StatusOr<std::unique_ptr<http_server::Server>> server = http_server::Server::Start(options, std::move(routes));
  if (!server.ok() && tls && absl::IsInvalidArgument(server.status())) {
    return absl::UnavailableError(absl::StrCat("cannot load the metrics TLS certificate ", o.tls_cert_file, ": ",
                                               server.status().message()));
  }
  if (!server.ok()) return server.status();
  e->server_ = std::move(*server);
  e->port_ = e->server_->port();
  return e;
}

MetricsEndpoint::~MetricsEndpoint() {
  if (server_ != nullptr) server_->Stop();
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
  for (prometheus::MetricFamily& family : families) {
    for (prometheus::ClientMetric& metric : family.metric) {
      for (const auto& [name, value] : constant_labels_) {
        bool present = false;
        for (const prometheus::ClientMetric::Label& l : metric.label) present = present || l.name == name;
        if (!present) metric.label.push_back({name, value});
      }
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
