// bench_load_flags.h: CLI11 options onto BenchLoadOptions.
#include "bench_load_flags.h"

#include <CLI/CLI.hpp>

namespace seam::cli {
namespace {

void AddTargetFlags(CLI::App* c, BenchLoadOptions& o) {
  c->add_option("--addr", o.addr, "a running seam-coordinator's gRPC HOST:PORT (default: start a local pipeline)");
  c->add_option("--http-addr", o.http_addr, "with --addr: its OpenAI-compatible HTTP API HOST:PORT");
  c->add_option("--tls-ca", o.security.tls_ca_file, "with --addr: PEM CA of the coordinator's certificate");
  c->add_option("--auth-token-file", o.security.auth_token_file, "with --addr: file holding the bearer token");
  c->add_option("--model", o.model_dir,
                "model directory: served by the local pipeline; with --addr, read for the ideal only "
                "(default: a random qwen3 of the sizes below)");
  c->add_option("--layers", o.random.layers, "layers of the random model")->capture_default_str();
  c->add_option("--hidden", o.random.hidden, "hidden size of the random model")->capture_default_str();
  c->add_option("--heads", o.random.heads, "attention heads of the random model")->capture_default_str();
  c->add_option("--kv-heads", o.random.kv_heads, "KV heads of the random model")->capture_default_str();
  c->add_option("--head-dim", o.random.head_dim, "head dim of the random model (0: hidden / heads)")
      ->capture_default_str();
  c->add_option("--intermediate", o.random.intermediate, "FFN size of the random model (0: 3 x hidden)")
      ->capture_default_str();
  c->add_option("--vocab", o.random.vocab, "vocabulary of the random model")->capture_default_str();
  c->add_option("--pp", o.pp, "pipeline stages of the local pipeline (--addr: the server's)")->capture_default_str();
  c->add_option("--tp", o.tp, "tensor-parallel ranks per stage (--addr: the server's)")->capture_default_str();
  c->add_option("--attn-dp", o.attn_dp, "attention data-parallel groups (--addr: the server's)")
      ->capture_default_str();
  c->add_option("--device", o.device, "cpu or cuda: the stages, and where the peaks are measured")
      ->check(CLI::IsMember({"cpu", "cuda"}))
      ->capture_default_str();
  c->add_option("--dtype", o.dtype, "f32 or bf16: the stages' weights, activations and KV cache")
      ->check(CLI::IsMember({"f32", "bf16"}))
      ->capture_default_str();
  c->add_flag("--insecure", o.insecure, "run the local pipeline without TLS and token");
  c->add_option("--stage-arg", o.stage_args, "extra seam-stage argument for every variant (repeat)")
      ->allow_extra_args(false);
  c->add_option("--coordinator-arg", o.coordinator_args, "extra seam-coordinator argument for every variant (repeat)")
      ->allow_extra_args(false);
  c->add_option("--variant", o.variants,
                "a variant measured on the same workload, the first being the baseline (repeat): LABEL, or "
                "'LABEL:stage:--flag=value coordinator:--flag=value ...'")
      ->allow_extra_args(false);
  c->add_option("--logs-dir", o.logs_dir, "keep the pipelines' logs in this directory");
}

void AddWorkloadFlags(CLI::App* c, BenchLoadOptions& o) {
  c->add_option("--workload", o.workload, "plain, shared-prefix:P (a shared P-token prefix + a unique suffix) or "
                                          "multi-turn:T (conversations of T turns replaying their history)")
      ->capture_default_str();
  c->add_option("--sessions", o.sessions, "requests (conversations for multi-turn)")->capture_default_str();
  c->add_option("--prompt-len", o.prompt_len,
                "prompt tokens (the suffix for shared-prefix, each user turn for multi-turn): N, uniform:A:B or "
                "longtail:MEDIAN:MAX (log-normal, chat-like)")
      ->capture_default_str();
  c->add_option("--output-len", o.output_len, "generated tokens per request, every one made: N, uniform:A:B or "
                                              "longtail:MEDIAN:MAX")
      ->capture_default_str();
  c->add_option("--seed", o.seed, "seed of the prompts, lengths and arrivals")->capture_default_str();
  c->add_option("--concurrency", o.concurrency, "closed loop: sessions in flight, a list (e.g. 1,8,64)");
  c->add_option("--rates", o.rates, "open loop: Poisson arrivals in sessions/s, a list (e.g. 0.5,2,inf)");
  c->add_option("--transport", o.transports, "grpc, http or grpc,http")->capture_default_str();
  c->add_option("--warmup", o.warmup, "untimed requests per variant and transport")->capture_default_str();
  c->add_option("--timeout", o.timeout_s, "each request's deadline in seconds")->capture_default_str();
  c->add_option("--progress", o.progress_s, "seconds between progress lines on stderr (0: none)")
      ->capture_default_str();
  c->add_option("--slo-ttft-ms", o.slo_ttft_ms, "goodput: a request's TTFT target (0: none)")->capture_default_str();
  c->add_option("--slo-tpot-ms", o.slo_tpot_ms, "goodput: a request's time-per-output-token target (0: none)")
      ->capture_default_str();
  c->add_flag("--no-ideal", o.no_ideal, "skip the peak measurements and the ideal");
  c->add_option("--json", o.json_out, "also write the report as JSON to this file");
  c->add_option("--svg", o.svg_out, "also write a chart of throughput against p99 ITL to this SVG file");
  c->add_flag("--smoke", o.smoke, "a tiny model and a few requests over both transports (CI smoke test)");
}

}  // namespace

CLI::App* AddBenchLoadCommand(CLI::App& bench, BenchLoadOptions& options) {
  CLI::App* c = bench.add_subcommand(
      "load", "a load generator over gRPC and the OpenAI HTTP API: closed and open loop, TTFT/ITL/E2E percentiles, "
              "goodput, against the ideal of the same load");
  AddTargetFlags(c, options);
  AddWorkloadFlags(c, options);
  return c;
}

}  // namespace seam::cli
