// MetricsEndpoint: a process's Prometheus `/metrics` listener and the
// registry its instruments live in. Served by seam's HTTP listener
// (http_server/: bounded connections and deadlines, exclusive bind;
// prometheus-cpp's civetweb exposer cannot start its threads in a process
// holding the CUDA libraries' static TLS: its fixed small thread stacks are
// refused with EINVAL). Like every seam listener: HTTPS when given a
// certificate and key, otherwise plain HTTP on loopback only, unless the
// operator says insecure.
// Instruments are thread-safe (prometheus-cpp's atomics); the endpoint owns
// the registry and outlives every instrument handed out from it.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include <prometheus/collectable.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include "absl/status/statusor.h"

namespace seam::http_server {
class Server;
}

namespace seam::metrics {

struct MetricsEndpointOptions {
  std::string listen;          // "host:port"; port 0 picks a free one; empty: no listener (Render only)
  std::string tls_cert_file;   // PEM chain and key: serve HTTPS (both or neither)
  std::string tls_key_file;
  bool insecure = false;       // plain HTTP on a non-loopback address
  // Added to every sample of every scrape (a series that has the label keeps its own), e.g. model_name.
  std::vector<std::pair<std::string, std::string>> constant_labels;
};

class MetricsEndpoint {
 public:
  // FAILED_PRECONDITION for plain HTTP on a non-loopback host without
  // `insecure`, or only one of cert and key; UNAVAILABLE when the address
  // cannot be bound ("address already in use" for a taken port) or the
  // certificate not loaded.
  static absl::StatusOr<std::unique_ptr<MetricsEndpoint>> Start(const MetricsEndpointOptions& options);
  ~MetricsEndpoint();  // stops the listener; no scrape runs after it returns

  prometheus::Registry& registry() { return *registry_; }
  // A collector asked for its families at every scrape (values read then,
  // e.g. from a status snapshot); kept alive by the endpoint.
  void AddCollectable(std::shared_ptr<prometheus::Collectable> collectable);
  int port() const { return port_; }
  // The exposition text a scrape returns now.
  std::string Render() const;

 private:
  MetricsEndpoint() = default;
  std::shared_ptr<prometheus::Registry> registry_;
  mutable std::mutex mu_;
  std::vector<std::shared_ptr<prometheus::Collectable>> collectables_;  // guarded by mu_
  std::unique_ptr<http_server::Server> server_;
  int port_ = 0;
  std::vector<std::pair<std::string, std::string>> constant_labels_;
};

// Bucket layouts of vLLM's histograms of the same meaning, in seconds.
prometheus::Histogram::BucketBoundaries TimeToFirstTokenBuckets();
prometheus::Histogram::BucketBoundaries InterTokenLatencyBuckets();
prometheus::Histogram::BucketBoundaries RequestLatencyBuckets();
// For per-step and handoff times: 100 µs to 10 s.
prometheus::Histogram::BucketBoundaries StepTimeBuckets();

}  // namespace seam::metrics
