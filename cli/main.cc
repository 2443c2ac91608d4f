// The `seam` command line: parses arguments (the only translation unit that
// includes CLI11), hands each subcommand to seam_cli and turns the status it
// returns into the message on stderr and the exit code (ReportStatus).
#include <iostream>

#include <cstdlib>

#include <CLI/CLI.hpp>

#include "seam/core/logging.h"
#include "seam/core/progress.h"

#include "bench_load_flags.h"
#include "bench_model_command.h"
#include "bench_pipeline_command.h"
#include "bench_serve_command.h"
#include "check_command.h"
#include "client_commands.h"
#include "command_status.h"
#include "demo_command.h"
#include "model_init_command.h"
#include "plan_command.h"
#include "run_command.h"
#include "serve_command.h"

int main(int argc, char** argv) {
  CLI::App app{"seam: serves transformer language models split into pipeline stages"};
  app.set_version_flag("--version", std::string("seam ") + SEAM_VERSION);
  app.require_subcommand(1);
  std::string log_level = "info", log_format = "text";
  app.add_option("--log-level", log_level,
                 "trace, debug, info, warn or error (also for the seam-stage and seam-coordinator processes "
                 "that run, serve and bench start)")
      ->capture_default_str();
  app.add_option("--log-format", log_format, "text or json (one JSON object per line); passed on like --log-level")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();

  seam::cli::PlanCommandOptions plan;
  CLI::App* plan_cmd = app.add_subcommand("plan", "print the bound stage plans of a model's layer stack");
  plan_cmd->add_option("--tp", plan.tp, "tensor-parallel ranks")->required();
  plan_cmd->add_option("--attn-dp", plan.attn_dp, "attention data-parallel groups (must divide --tp)")
      ->capture_default_str();
  plan_cmd->add_option("--layers", plan.layers, "decoder layers (nemotron_h: the pattern's length)")
      ->capture_default_str();
  plan_cmd->add_option("--policy", plan.policy, "reduction policy: ar, rs, rsv, rs+rsv or auto")
      ->capture_default_str();
  plan_cmd->add_option("--arch", plan.arch,
                       "architecture: qwen3, qwen3_moe, longcat (a MoE branch merged back) or nemotron_h")
      ->capture_default_str();
  plan_cmd->add_option("--reads", plan.reads,
                       "residual reads: plain, gathering (gathering reads) or after-gather (reads after the gather)")
      ->capture_default_str();
  plan_cmd->add_option("--pattern", plan.pattern,
                       "nemotron_h: one stage per character, M Mamba2 / * attention (mixers), - MLP");
  plan_cmd->add_flag("--json", plan.json, "print JSON instead of text");
  plan_cmd->add_option("--rank", plan.rank, "build only this TP rank (default: every rank, compared)");

  seam::cli::DemoCommandOptions demo;
  CLI::App* demo_cmd = app.add_subcommand("demo", "kernels and collectives demo over Gloo on TCP loopback");
  demo_cmd->add_option("--ranks", demo.ranks, "rank threads")->capture_default_str();
  demo_cmd->add_option("--rows", demo.rows, "token rows")->capture_default_str();
  demo_cmd->add_option("--hidden", demo.hidden, "hidden size")->capture_default_str();
  demo_cmd->add_option("--seed", demo.seed, "random data seed")->capture_default_str();

  seam::cli::ModelInitCommandOptions init;
  CLI::App* model_cmd = app.add_subcommand("model", "model checkpoints");
  model_cmd->require_subcommand(1);
  CLI::App* init_cmd = model_cmd->add_subcommand("init", "write a Hugging Face checkpoint with random weights");
  init_cmd->add_option("--arch", init.arch, "architecture: qwen3, qwen3_moe or nemotron_h")->capture_default_str();
  init_cmd->add_option("--layers", init.layers, "num_hidden_layers")->required();
  init_cmd->add_option("--hidden", init.hidden, "hidden_size")->required();
  init_cmd->add_option("--heads", init.heads, "num_attention_heads")->required();
  init_cmd->add_option("--kv-heads", init.kv_heads, "num_key_value_heads (default: --heads)");
  init_cmd->add_option("--head-dim", init.head_dim, "head_dim (default: hidden / heads)");
  init_cmd->add_option("--intermediate", init.intermediate, "intermediate_size (dense FFN)")->required();
  init_cmd->add_option("--vocab", init.vocab, "vocab_size")->required();
  init_cmd->add_option("--experts", init.experts, "num_experts (qwen3_moe)");
  init_cmd->add_option("--top-k", init.top_k, "num_experts_per_tok (qwen3_moe)");
  init_cmd->add_option("--moe-intermediate", init.moe_intermediate, "moe_intermediate_size (qwen3_moe)");
  init_cmd->add_option("--pattern", init.pattern, "hybrid_override_pattern, one of M * - per layer (nemotron_h)");
  init_cmd->add_option("--mamba-heads", init.mamba_heads, "mamba_num_heads (nemotron_h)");
  init_cmd->add_option("--mamba-head-dim", init.mamba_head_dim, "mamba_head_dim (nemotron_h)");
  init_cmd->add_option("--groups", init.groups, "n_groups (nemotron_h)")->capture_default_str();
  init_cmd->add_option("--state", init.state, "ssm_state_size (nemotron_h)")->capture_default_str();
  init_cmd->add_option("--conv-kernel", init.conv_kernel, "conv_kernel (nemotron_h)")->capture_default_str();
  init_cmd->add_option("--chunk", init.chunk, "chunk_size (nemotron_h)")->capture_default_str();
  init_cmd->add_option("--dtype", init.dtype, "weights dtype: f32 or bf16")->capture_default_str();
  init_cmd->add_option("--scale", init.scale, "weights std is 0.02 x scale")->capture_default_str();
  init_cmd->add_option("--seed", init.seed, "random weights seed")->capture_default_str();
  init_cmd->add_flag("--exact", init.exact, "dyadic weights whose fp32 sums are exact");
  init_cmd->add_flag("--tie-embeddings", init.tie_embeddings, "tie lm_head to the embedding");
  init_cmd->add_option("--out", init.out, "output directory")->required();
  init_cmd->add_flag("--force", init.force, "overwrite a checkpoint already in --out");

  seam::cli::CheckCommandOptions check;
  CLI::App* check_cmd =
      app.add_subcommand("check", "compare a TP group's logits and greedy tokens with a single rank (CPU over Gloo, "
                                  "or GPUs over NCCL with --device cuda)");
  check_cmd->add_option("--model", check.model_dir, "Hugging Face model directory")->required();
  check_cmd->add_option("--tp", check.tp, "tensor-parallel ranks")->capture_default_str();
  check_cmd->add_option("--attn-dp", check.attn_dp, "attention data-parallel groups")->capture_default_str();
  check_cmd->add_option("--pp", check.pp, "pipeline pieces (even layer ranges); tp 1 must match bitwise")
      ->capture_default_str();
  check_cmd->add_option("--policy", check.policy, "reduction policy: ar, rs, rsv, rs+rsv or auto")
      ->capture_default_str();
  check_cmd->add_option("--prompts", check.prompts, "prompts in the batch")->capture_default_str();
  check_cmd->add_option("--max-len", check.max_len, "longest prompt")->capture_default_str();
  check_cmd->add_option("--decode-steps", check.decode_steps, "greedy decode steps")->capture_default_str();
  check_cmd->add_option("--seed", check.seed, "prompt seed")->capture_default_str();
  check_cmd->add_option("--tolerance", check.tolerance, "max relative logits error")->capture_default_str();
  check_cmd->add_option("--device", check.device, "cpu or cuda (piece k's TP rank r on GPU k*tp + r when there are "
                                                  "enough GPUs; the single-rank reference on GPU 0)")
      ->check(CLI::IsMember({"cpu", "cuda"}))
      ->capture_default_str();
  check_cmd->add_option("--dtype", check.dtype, "compute and weight dtype of both sides: f32 or bf16")
      ->check(CLI::IsMember({"f32", "bf16"}))
      ->capture_default_str();
  check_cmd->add_option("--cp", check.cp,
                        "context-parallel ranks of the checked group (without attention DP; attention TP is tp / cp); "
                        "with --variant auto every prefill runs context-parallel")
      ->capture_default_str();
  check_cmd->add_option("--variant", check.variant,
                        "the checked group's batch variants: auto (per batch), sequence-parallel, context-parallel "
                        "(every prefill), or ordinary, unpadded, input-scattered for every batch")
      ->check(CLI::IsMember({"auto", "sequence-parallel", "sp", "context-parallel", "cp", "ordinary", "unpadded",
                              "input-scattered"}))
      ->capture_default_str();
  check_cmd->add_option("--allreduce-fusion", check.allreduce_fusion,
                        "CUDA bf16 TP groups: the one-shot IPC all-reduce + add + RMSNorm at stage inputs: off, auto "
                        "(where a start-up measurement finds it no slower) or always")
      ->check(CLI::IsMember({"off", "auto", "always"}))
      ->capture_default_str();

  seam::cli::BenchModelOptions bench_model;
  CLI::App* bench_cmd = app.add_subcommand("bench", "benchmarks (ratios against a baseline of the same run)");
  CLI::App* bench_model_cmd = bench_cmd->add_subcommand("model", "prefill/decode tokens/s on CPU ranks, TP 1 vs TP 2");
  bench_cmd->require_subcommand(1);
  bench_model_cmd->add_option("--model", bench_model.model_dir, "model directory (default: a random qwen3)");
  bench_model_cmd->add_option("--hidden", bench_model.hidden, "hidden size of the random model")->capture_default_str();
  bench_model_cmd->add_option("--layers", bench_model.layers, "layers of the random model")->capture_default_str();
  bench_model_cmd->add_option("--batch", bench_model.batch, "sequences")->capture_default_str();
  bench_model_cmd->add_option("--prompt-len", bench_model.prompt_len, "prefill tokens per sequence")
      ->capture_default_str();
  bench_model_cmd->add_option("--decode-steps", bench_model.decode_steps, "decode steps")->capture_default_str();
  bench_model_cmd->add_option("--repeats", bench_model.repeats, "best of N")->capture_default_str();
  bench_model_cmd->add_option("--json", bench_model.json_out, "also write results as JSON to this file");
  seam::cli::BenchPipelineOptions bench_pp;
  CLI::App* bench_pp_cmd = bench_cmd->add_subcommand(
      "pipeline", "handoff MiB/s vs ucx_perftest; local pipeline tokens/s at PP 1..N vs ideal");
  bench_pp_cmd->add_flag("--quick", bench_pp.quick, "few iterations, tiny model and workload (smoke test)");
  bench_pp_cmd->add_option("--max-pp", bench_pp.max_pp, "pipeline stages up to")->capture_default_str();
  bench_pp_cmd->add_option("--requests", bench_pp.requests, "concurrent requests")->capture_default_str();
  bench_pp_cmd->add_option("--prompt-len", bench_pp.prompt_len, "prompt tokens")->capture_default_str();
  bench_pp_cmd->add_option("--new-tokens", bench_pp.new_tokens, "generated tokens")->capture_default_str();
  bench_pp_cmd->add_option("--layers", bench_pp.layers, "layers of the random qwen3")->capture_default_str();
  bench_pp_cmd->add_option("--hidden", bench_pp.hidden, "hidden size")->capture_default_str();
  bench_pp_cmd->add_option("--ucx-mode", bench_pp.ucx_mode, "pipeline stage transport: tcp or shm")
      ->capture_default_str();
  bench_pp_cmd->add_option("--json", bench_pp.json_out, "also write results as JSON to this file");

  seam::cli::BenchServeOptions bench_serve;
  CLI::App* bench_serve_cmd = bench_cmd->add_subcommand(
      "serve", "served tokens/s, ms/step, TTFT and ITL of a local pipeline vs in-process decode and the weight floor");
  bench_serve_cmd->add_option("--logs-dir", bench_serve.logs_dir, "keep the pipeline's logs in this directory");
  bench_serve_cmd->add_option("--model", bench_serve.model_dir, "model directory (default: a random qwen3)");
  bench_serve_cmd->add_option("--hidden", bench_serve.hidden, "hidden size of the random model")->capture_default_str();
  bench_serve_cmd->add_option("--layers", bench_serve.layers, "layers of the random model")->capture_default_str();
  bench_serve_cmd->add_option("--heads", bench_serve.heads, "attention heads of the random model")->capture_default_str();
  bench_serve_cmd->add_option("--kv-heads", bench_serve.kv_heads, "KV heads of the random model")->capture_default_str();
  bench_serve_cmd->add_option("--head-dim", bench_serve.head_dim, "head dim of the random model (0: hidden / heads)")
      ->capture_default_str();
  bench_serve_cmd->add_option("--intermediate", bench_serve.intermediate, "FFN size of the random model (0: 3 x hidden)")
      ->capture_default_str();
  bench_serve_cmd->add_option("--vocab", bench_serve.vocab, "vocabulary of the random model")->capture_default_str();
  bench_serve_cmd->add_option("--pp", bench_serve.pp, "pipeline stages (seam-stage processes)")->capture_default_str();
  bench_serve_cmd->add_option("--tp", bench_serve.tp, "tensor-parallel ranks per stage")->capture_default_str();
  bench_serve_cmd->add_option("--attn-dp", bench_serve.attn_dp, "attention data-parallel groups")->capture_default_str();
  bench_serve_cmd->add_option("--device", bench_serve.device, "cpu or cuda")
      ->check(CLI::IsMember({"cpu", "cuda"}))
      ->capture_default_str();
  bench_serve_cmd->add_option("--dtype", bench_serve.dtype, "f32 or bf16")
      ->check(CLI::IsMember({"f32", "bf16"}))
      ->capture_default_str();
  bench_serve_cmd->add_option("--batch", bench_serve.batch, "concurrent sequences, a list: one row each")
      ->capture_default_str();
  bench_serve_cmd->add_option("--prompt-len", bench_serve.prompt_len, "prompt tokens")->capture_default_str();
  bench_serve_cmd->add_option("--new-tokens", bench_serve.new_tokens, "generated tokens per sequence")
      ->capture_default_str();
  bench_serve_cmd->add_option("--warmup", bench_serve.warmup, "untimed rounds before each timed one")
      ->capture_default_str();
  bench_serve_cmd->add_flag("--quick", bench_serve.quick, "tiny model and workload (smoke test)");
  bench_serve_cmd->add_option("--json", bench_serve.json_out, "also write the figures as JSON to this file");
  bench_serve_cmd->add_option("--stage-arg", bench_serve.stage_args, "extra seam-stage argument (repeat), e.g. "
                                                                      "--stage-arg=--allreduce-fusion=off")
      ->allow_extra_args(false);
  bench_serve_cmd->add_option("--coordinator-arg", bench_serve.coordinator_args,
                              "extra seam-coordinator argument (repeat), e.g. --coordinator-arg=--kv-blocks=4096")
      ->allow_extra_args(false);

  seam::cli::BenchLoadOptions bench_load;
  CLI::App* bench_load_cmd = seam::cli::AddBenchLoadCommand(*bench_cmd, bench_load);

  seam::cli::RunCommandOptions run;
  CLI::App* run_cmd = app.add_subcommand("run", "a local pipeline of seam-stage processes (CPU, or CUDA with --device) and a seam-coordinator, "
                                                "checked against a single-process run");
  run_cmd->add_option("--model", run.model_dir, "Hugging Face model directory (default: a small random qwen3)");
  run_cmd->add_option("--pp", run.pp, "pipeline stages (seam-stage processes)")->capture_default_str();
  run_cmd->add_option("--tp", run.tp, "tensor-parallel ranks per stage")->capture_default_str();
  run_cmd->add_option("--attn-dp", run.attn_dp, "attention data-parallel groups")->capture_default_str();
  run_cmd->add_option("--max-new-tokens", run.max_new_tokens, "greedy tokens per prompt")->capture_default_str();
  run_cmd->add_option("--prompts", run.prompts, "fixed prompts to send")->capture_default_str();
  run_cmd->add_option("--ucx-mode", run.ucx_mode, "stage-to-stage transport: tcp or shm")->capture_default_str();
  run_cmd->add_option("--device", run.device, "where stages and the reference compute: cpu or cuda (rank r on GPU r)")
      ->check(CLI::IsMember({"cpu", "cuda"}))
      ->capture_default_str();
  run_cmd->add_option("--dtype", run.dtype, "weights, activations and handoffs of the stages and the reference: f32 "
                                            "or bf16")
      ->check(CLI::IsMember({"f32", "bf16"}))
      ->capture_default_str();
  run_cmd->add_option("--allreduce-fusion", run.allreduce_fusion,
                      "CUDA bf16 TP groups: the one-shot IPC all-reduce + add + RMSNorm: off, auto or always")
      ->check(CLI::IsMember({"off", "auto", "always"}))
      ->capture_default_str();
  run_cmd->add_option("--reduction-policy", run.policy, "the stages' reduction policy: ar, rs, rsv, rs+rsv or auto")
      ->check(CLI::IsMember({"ar", "rs", "rsv", "rs+rsv", "auto"}))
      ->capture_default_str();
  run_cmd->add_option("--cp", run.cp, "context-parallel ranks in each stage's TP group (seam-stage --cp)")
      ->capture_default_str();
  run_cmd->add_option("--stage-arg", run.stage_args, "extra seam-stage argument (repeat), e.g. "
                                                     "--stage-arg=--handoff-transport=auto");
  run_cmd->add_option("--cp-min-rows", run.cp_min_rows,
                      "--variant auto with --cp > 1: prefill batches of this many rows run context-parallel")
      ->capture_default_str();
  run_cmd->add_option("--variant", run.variant,
                      "the stages' batch variants: auto (per batch), sequence-parallel, context-parallel (every "
                      "prefill), or ordinary, unpadded, input-scattered for every batch")
      ->check(CLI::IsMember({"auto", "sequence-parallel", "sp", "context-parallel", "cp", "ordinary", "unpadded",
                              "input-scattered"}))
      ->capture_default_str();
  run_cmd->add_option("--scatter-input-rows", run.scatter_input_rows,
                      "--variant auto: batches of this many rows in a DP group run input-scattered")
      ->capture_default_str();
  run_cmd->add_flag("--insecure", run.insecure,
                    "run the local pipeline without TLS and token (if certificate setup fails on this machine)");

  seam::cli::ServeCommandOptions serve;
  CLI::App* serve_cmd = app.add_subcommand("serve", "a local CPU pipeline serving the client API until SIGINT/SIGTERM");
  serve_cmd->add_option("--model", serve.model_dir, "Hugging Face model directory (default: a small random qwen3)");
  serve_cmd->add_option("--pp", serve.pp, "pipeline stages (seam-stage processes)")->capture_default_str();
  serve_cmd->add_option("--tp", serve.tp, "tensor-parallel ranks per stage")->capture_default_str();
  serve_cmd->add_option("--attn-dp", serve.attn_dp, "attention data-parallel groups")->capture_default_str();
  serve_cmd->add_option("--port", serve.port, "coordinator port on 127.0.0.1 (0: any free one)")->capture_default_str();
  serve_cmd->add_option("--port-file", serve.port_file, "write the coordinator's port here once serving");
  serve_cmd->add_option("--http-port", serve.http_port,
                        "OpenAI-compatible HTTP API port on 127.0.0.1 (0: any free one, -1: none)")
      ->capture_default_str();
  serve_cmd->add_option("--metrics-port", serve.metrics_port,
                        "Prometheus /metrics of the coordinator on this 127.0.0.1 port, of each stage on a free one "
                        "(HTTPS with the pipeline's certificate unless --insecure; 0: any free one, -1: none)")
      ->capture_default_str();
  serve_cmd->add_option("--ucx-mode", serve.ucx_mode, "stage-to-stage transport: tcp or shm")->capture_default_str();
  serve_cmd->add_flag("--insecure", serve.insecure,
                      "serve without TLS and token (default: an ephemeral CA, certificates and token in the work "
                      "dir, printed at start)");

  // Client credentials of `seam generate` / `seam status`.
  const auto add_client_security = [](CLI::App* cmd, seam::security::ClientSecurityOptions& s) {
    cmd->add_option("--tls-ca", s.tls_ca_file, "PEM CA of the coordinator's certificate: connect over TLS");
    cmd->add_option("--auth-token-file", s.auth_token_file,
                    "file holding the coordinator's bearer token (sent as authorization: Bearer <token>)");
    cmd->add_option("--tls-client-cert", s.tls_client_cert_file, "PEM certificate for mutual TLS");
    cmd->add_option("--tls-client-key", s.tls_client_key_file, "PEM private key of --tls-client-cert");
  };

  seam::cli::GenerateCommandOptions gen;
  CLI::App* gen_cmd = app.add_subcommand(
      "generate", "send text or token-id prompts to a seam-coordinator; print the text or tokens");
  gen_cmd->alias("submit");
  gen_cmd->add_option("--addr", gen.addr, "coordinator HOST:PORT")->required();
  gen_cmd->add_option("--prompt", gen.prompts, "token ids, e.g. \"3 14 15\" (repeat for a batch)");
  gen_cmd->add_option("text", gen.text_prompts,
                      "prompts as text, tokenized by the coordinator with the model's tokenizer (one or more)");
  gen_cmd->add_option("--max-new-tokens", gen.max_new_tokens, "tokens per prompt")->capture_default_str();
  gen_cmd->add_option("--temperature", gen.temperature, "0: greedy")->capture_default_str();
  gen_cmd->add_option("--top-k", gen.top_k, "0: off")->capture_default_str();
  gen_cmd->add_option("--top-p", gen.top_p, "1: off")->capture_default_str();
  gen_cmd->add_option("--seed", gen.seed, "sampling seed")->capture_default_str();
  gen_cmd->add_flag("--stream", gen.stream, "use the streaming Generate call (text mode prints pieces as they come)");
  gen_cmd->add_flag("--json", gen.json, "print one JSON document");
  gen_cmd->add_option("--timeout", gen.timeout_s, "call deadline in seconds")->capture_default_str();
  add_client_security(gen_cmd, gen.security);

  seam::cli::StatusCommandOptions stat;
  CLI::App* stat_cmd = app.add_subcommand("status", "a seam-coordinator's health, model, topology and stages");
  stat_cmd->add_option("--addr", stat.addr, "coordinator HOST:PORT")->required();
  stat_cmd->add_flag("--json", stat.json, "print JSON");
  stat_cmd->add_option("--timeout", stat.timeout_s, "call deadline in seconds")->capture_default_str();
  add_client_security(stat_cmd, stat.security);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }
  // Children (local pipelines' seam-stage and seam-coordinator) inherit an
  // explicit choice through the environment InitLogging reads.
  if (app.count("--log-level") > 0) setenv("SEAM_LOG_LEVEL", log_level.c_str(), 1);
  if (app.count("--log-format") > 0) setenv("SEAM_LOG_FORMAT", log_format.c_str(), 1);
  seam::LogFormat format = seam::LogFormat::kText;
  seam::ParseLogFormat(log_format, &format);
  seam::InitLogging(log_level, "seam", format);
  // Long steps (model init, loading weights, the KV cache) show progress:
  // redrawn on a terminal, log lines elsewhere.
  seam::SetProgressMode(seam::ProgressMode::kAuto);
  const auto report = [](const char* command, const absl::Status& status) {
    return seam::cli::ReportStatus(command, status, std::cerr);
  };
  // Commands whose whole output is one text.
  const auto print = [&](const char* command, const absl::StatusOr<std::string>& text) {
    if (text.ok()) std::cout << *text;
    return report(command, text.status());
  };
  if (plan_cmd->parsed()) return print("seam plan", seam::cli::RunPlanCommand(plan));
  if (bench_pp_cmd->parsed()) {
    return report("seam bench pipeline", seam::cli::RunBenchPipelineCommand(bench_pp, std::cout));
  }
  if (bench_serve_cmd->parsed()) {
    return report("seam bench serve", seam::cli::RunBenchServeCommand(bench_serve, std::cout));
  }
  if (bench_load_cmd->parsed()) return report("seam bench load", seam::cli::RunBenchLoadCommand(bench_load, std::cout));
  if (bench_model_cmd->parsed()) {
    return report("seam bench model", seam::cli::RunBenchModelCommand(bench_model, std::cout));
  }
  if (check_cmd->parsed()) return report("seam check", seam::cli::RunCheckCommand(check, std::cout));
  if (run_cmd->parsed()) return report("seam run", seam::cli::RunRunCommand(run, std::cout));
  if (serve_cmd->parsed()) return report("seam serve", seam::cli::RunServeCommand(serve, std::cout));
  if (gen_cmd->parsed()) return report("seam generate", seam::cli::RunGenerateCommand(gen, std::cout));
  if (stat_cmd->parsed()) return report("seam status", seam::cli::RunStatusCommand(stat, std::cout));
  if (demo_cmd->parsed()) return report("seam demo", seam::cli::RunDemoCommand(demo, std::cout));
  if (init_cmd->parsed()) return print("seam model init", seam::cli::RunModelInitCommand(init));
  return 2;
}
