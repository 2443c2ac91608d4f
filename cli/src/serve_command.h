// `seam serve [MODEL]`: a local pipeline (seam-stage processes behind a
// seam-coordinator, as `seam run` starts them, on the visible GPUs or the
// CPU) kept serving the client API and the OpenAI-compatible HTTP API until
// SIGINT or SIGTERM, then shut down with every child reaped. The flags a
// vLLM user types are accepted under their vLLM names where seam has the
// same knob (--tensor-parallel-size, --max-model-len, ...); the limits they
// set only lower what the stages report. The children's logs stream to
// serve's stderr, each line tagged with its process.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

#include "absl/status/status.h"

namespace seam::cli {

struct ServeCommandOptions {
  std::string model_dir;         // a local checkpoint folder; empty: the default small random qwen3 in a temp dir
  std::string device = "auto";   // auto (cuda when a GPU is visible) | cpu | cuda
  std::string dtype = "auto";    // auto (the checkpoint's torch_dtype) | f32 | bf16
  int pp = 1;                    // seam-stage processes
  int tp = 1;                    // TP ranks per stage
  int attn_dp = 1;               // attention-DP groups per stage
  std::string host = "127.0.0.1";  // where the client APIs listen; beyond loopback only with TLS and a token
  int port = 0;                  // coordinator gRPC port; 0 picks a free one
  int http_port = 0;             // OpenAI-compatible HTTP; 0 picks a free one, -1: none
  int metrics_port = -1;         // coordinator's Prometheus /metrics on 127.0.0.1 (stages: free ports); 0: a free
                                 // one, -1: none
  bool metrics_on_api = false;   // /metrics also on the HTTP API port (behind its token)
  double gpu_memory_utilization = 0;  // share of each GPU the stages may fill (0: theirs); split when stages share
  int64_t max_model_len = 0;     // lowers the context the stages report (0: theirs)
  int64_t max_num_seqs = 0;      // lowers the sequences running at once (0: the stages' bound)
  std::string served_model_name;  // the HTTP API's model name (default: the folder's name)
  std::string api_key;           // the bearer token clients send (default: a random one, written 0600)
  std::string api_key_file;      // a file holding it
  std::string logs_dir;          // keep the processes' logs here (default: a temp dir removed at exit)
  std::string port_file;         // written with the bound port once serving
  std::string ucx_mode = "tcp";  // tcp | shm
  bool insecure = false;         // plaintext and no token (default: TLS, mutual TLS and a token); loopback only
};

// Serves until SIGINT or SIGTERM (then OK, exit 0). INVALID_ARGUMENT
// (exit 2): a bad flag or MODEL, named in the message's first line;
// UNAVAILABLE (exit 1): a child process died; any other error (exit 1):
// the start failed. A failure's message is one line naming the cause (the
// child's own error, the flag, the file, the port) then where the logs are.
absl::Status RunServeCommand(const ServeCommandOptions& options, std::ostream& out, std::ostream& err);

}  // namespace seam::cli
