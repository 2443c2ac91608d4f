// The state a Server shares with its connections' exchanges and its MHD
// callbacks. Internal to seam_http_server.
#pragma once

#include <microhttpd.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "head_deadlines.h"
#include "seam/http_server/http_server.h"
#include "worker_pool.h"

namespace seam::http_server {

class Exchange;

struct Server::Impl {
  ServerOptions options;
  std::vector<Route> routes;
  // PEM texts handed to MHD (kept for the daemon's life).
  std::string cert_pem, key_pem, client_ca_pem;
  int listen_fd = -1;
  int port = 0;
  MHD_Daemon* daemon = nullptr;
  std::unique_ptr<WorkerPool> workers;
  std::unique_ptr<HeadDeadlines> heads;
  std::atomic<bool> stopping{false};
  std::mutex mu;
  std::set<std::shared_ptr<Exchange>> live;  // exchanges from head to completion; guarded by mu
  bool stopped = false;                      // guarded by mu

  const Route* Find(const std::string& method, const std::string& path, bool* path_known) const;
  // An answer the server makes itself: `status` with `message`, through options.error_answer.
  Response ErrorAnswer(int status, const std::string& message) const;
};

}  // namespace seam::http_server
