// `seam serve`: a local CPU pipeline (seam-stage processes behind a
// seam-coordinator on loopback, as `seam run` starts) kept serving the client
// API until SIGINT or SIGTERM, then shut down with every child reaped.
#pragma once

#include <ostream>
#include <string>

#include "absl/status/status.h"

namespace seam::cli {

struct ServeCommandOptions {
  std::string model_dir;         // empty: the default small random qwen3 checkpoint in a temp dir
  int pp = 2;                    // seam-stage processes
  int tp = 2;                    // TP ranks per stage
  int attn_dp = 1;               // attention-DP groups per stage
  int port = 0;                  // coordinator port on 127.0.0.1; 0 picks a free one
  int http_port = 0;             // OpenAI-compatible HTTP on 127.0.0.1; 0 picks a free one, -1: none
  int metrics_port = -1;         // coordinator's Prometheus /metrics on 127.0.0.1 (stages: free ports); 0: a free
                                 // one, -1: none
  std::string port_file;         // written with the bound port once serving
  std::string ucx_mode = "tcp";  // tcp | shm
  bool insecure = false;         // plaintext and no token (default: TLS, mutual TLS and a token)
};

// Serves until SIGINT or SIGTERM (then OK, exit 0). INVALID_ARGUMENT
// (exit 2): a bad flag; UNAVAILABLE (exit 1): a child process died, its log
// tails in the message; any other error (exit 1): the start failed.
absl::Status RunServeCommand(const ServeCommandOptions& options, std::ostream& out);

}  // namespace seam::cli
