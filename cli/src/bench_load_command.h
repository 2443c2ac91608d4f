// `seam bench load`: a load generator over the coordinator's gRPC API and
// its OpenAI-compatible HTTP API. It targets a running server (--addr) or
// starts a local pipeline of seam-stage processes and a seam-coordinator
// (LocalPipeline, as `seam run` and `seam bench serve` do), once per variant
// (a set of extra stage and coordinator arguments; the first is the
// baseline the others are compared with). Each variant runs the same seeded
// workload at every load point (closed loop at each concurrency, open loop
// at each rate) over each transport, and every row is stated against the
// ideal of the same load from the model's FLOPs and bytes (runtime's
// StepFloor) at the matmul peak and copy bandwidth measured in the same run.
// Output: tables, JSON (--json) and an SVG chart of throughput against p99
// ITL (--svg). Any failed request ends the run with its error (exit 1).
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "bench_random_model.h"
#include "seam/security/credentials.h"

namespace seam::cli {

struct BenchLoadOptions {
  // A running server: its gRPC address, its HTTP API address (for the http
  // transport) and the client credentials. Empty addr: a local pipeline.
  std::string addr, http_addr;
  security::ClientSecurityOptions security;
  // The model: served by the local pipeline; with --addr, read only for the
  // ideal (without it the ideal is left out). Empty: a random qwen3 of the
  // sizes below, written for the run.
  std::string model_dir;
  RandomModelSizes random;
  // The local pipeline.
  int pp = 1, tp = 1, attn_dp = 1;
  std::string device = "cpu";  // cpu | cuda: the stages, and where the peaks are measured
  std::string dtype = "f32";   // f32 | bf16: the stages' weights, activations and KV cache
  bool insecure = false;
  std::vector<std::string> stage_args, coordinator_args;  // every variant's
  // "LABEL" or "LABEL:ARG ARG ..." with each ARG "stage:--flag=value" or
  // "coordinator:--flag=value" added to that variant's processes.
  std::vector<std::string> variants;
  std::string logs_dir;  // keep the pipelines' logs here (default: removed)
  // The workload (load_workload.h).
  std::string workload = "plain";  // plain | shared-prefix:P | multi-turn:T
  int sessions = 32;               // requests (conversations for multi-turn)
  std::string prompt_len = "128";  // N | uniform:A:B | longtail:MEDIAN:MAX
  std::string output_len = "64";
  uint64_t seed = 1;
  // Load points: closed loop at each concurrency, open loop at each rate
  // (sessions/s; "inf" sends every session at once). Neither: concurrency = sessions.
  std::string concurrency;
  std::string rates;
  std::string transports = "grpc";  // grpc, http or both ("grpc,http")
  int warmup = 2;                   // untimed requests per variant and transport
  double timeout_s = 600;           // each request's deadline
  double progress_s = 10;           // a progress line on stderr this often
  double slo_ttft_ms = 0, slo_tpot_ms = 0;  // goodput's latency target (0: none)
  bool no_ideal = false;            // skip the peak measurements and the ideal
  std::string json_out, svg_out;
  // A tiny random model, and for the flags left at their defaults a few
  // tiny requests over both transports, closed loop and open: the CI smoke
  // test of the command.
  bool smoke = false;
};

// INVALID_ARGUMENT for bad flags (exit 2); the failed request's or the
// pipeline's error otherwise (exit 1).
absl::Status RunBenchLoadCommand(const BenchLoadOptions& options, std::ostream& out);

}  // namespace seam::cli
