// The `seam` command line: parses arguments (the only translation unit that
// includes CLI11), hands each subcommand to seam_cli and turns the status it
// returns into the message on stderr and the exit code (ReportStatus).
#include <iostream>

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <vector>

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
#include "logits_command.h"
#include "model_init_command.h"
#include "nearest_name.h"
#include "plan_command.h"
#include "run_command.h"
#include "serve_command.h"

namespace {

// A subcommand: its flags bound into its options (which `run` keeps alive),
// and how it runs once parsed, to an exit code.
struct Command {
  CLI::App* app = nullptr;
  std::function<int()> run;
};

int Report(const char* command, const absl::Status& status) {
  return seam::cli::ReportStatus(command, status, std::cerr);
}

// Commands whose whole output is one text.
int Print(const char* command, const absl::StatusOr<std::string>& text) {
  if (text.ok()) std::cout << *text;
  return Report(command, text.status());
}

Command AddPlanCommand(CLI::App& parent) {
  auto o = std::make_shared<seam::cli::PlanCommandOptions>();
  CLI::App* plan_cmd = parent.add_subcommand("plan", "print the bound stage plans of a model's layer stack");
  plan_cmd->add_option("--tp", o->tp, "tensor-parallel ranks")->required();
  plan_cmd->add_option("--attn-dp", o->attn_dp, "attention data-parallel groups (must divide --tp)")
      ->capture_default_str();
  plan_cmd->add_option("--layers", o->layers, "decoder layers (nemotron_h: the pattern's length)")
      ->capture_default_str();
  plan_cmd->add_option("--policy", o->policy, "reduction policy: ar, rs, rsv, rs+rsv or auto")
      ->capture_default_str();
  plan_cmd->add_option("--arch", o->arch,
                       "architecture: qwen3, qwen3_moe, longcat / longcat_flash (a MoE branch merged back) or "
                       "nemotron_h")
      ->capture_default_str();
  plan_cmd->add_option("--reads", o->reads,
                       "residual reads: plain, gathering (gathering reads) or after-gather (reads after the gather)")
      ->capture_default_str();
  plan_cmd->add_option("--pattern", o->pattern,
                       "nemotron_h: one stage per character, M Mamba2 / * attention (mixers), - MLP");
  plan_cmd->add_flag("--json", o->json, "print JSON instead of text");
  plan_cmd->add_option("--rank", o->rank, "build only this TP rank (default: every rank, compared)");
  return {plan_cmd, [o] { return Print("seam plan", seam::cli::RunPlanCommand(*o)); }};
}

Command AddDemoCommand(CLI::App& parent) {
  auto o = std::make_shared<seam::cli::DemoCommandOptions>();
  CLI::App* demo_cmd = parent.add_subcommand("demo", "kernels and collectives demo over Gloo on TCP loopback");
  demo_cmd->add_option("--ranks", o->ranks, "rank threads")->capture_default_str();
  demo_cmd->add_option("--rows", o->rows, "token rows")->capture_default_str();
  demo_cmd->add_option("--hidden", o->hidden, "hidden size")->capture_default_str();
  demo_cmd->add_option("--seed", o->seed, "random data seed")->capture_default_str();
  return {demo_cmd, [o] { return Report("seam demo", seam::cli::RunDemoCommand(*o, std::cout)); }};
}

Command AddModelInitCommand(CLI::App& parent) {
  auto o = std::make_shared<seam::cli::ModelInitCommandOptions>();
  CLI::App* init_cmd = parent.add_subcommand("init", "write a Hugging Face checkpoint with random weights");
  init_cmd->add_option("--arch", o->arch, "architecture: qwen3, qwen3_moe, nemotron_h or longcat_flash (longcat)")
      ->capture_default_str();
  init_cmd->add_option("--layers", o->layers, "num_hidden_layers")->required();
  init_cmd->add_option("--hidden", o->hidden, "hidden_size")->required();
  init_cmd->add_option("--heads", o->heads, "num_attention_heads")->required();
  init_cmd->add_option("--kv-heads", o->kv_heads, "num_key_value_heads (default: --heads)");
  init_cmd->add_option("--head-dim", o->head_dim, "head_dim (default: hidden / heads)");
  init_cmd->add_option("--intermediate", o->intermediate, "intermediate_size (dense FFN)")->required();
  init_cmd->add_option("--vocab", o->vocab, "vocab_size")->required();
  init_cmd->add_option("--experts", o->experts, "num_experts (qwen3_moe)");
  init_cmd->add_option("--top-k", o->top_k, "num_experts_per_tok (qwen3_moe)");
  init_cmd->add_option("--moe-intermediate", o->moe_intermediate, "moe_intermediate_size (qwen3_moe)");
  init_cmd->add_option("--zero-experts", o->zero_experts, "zero_expert_num (longcat_flash)");
  init_cmd->add_option("--routed-scaling", o->routed_scaling, "routed_scaling_factor (longcat_flash)");
  init_cmd->add_option("--q-lora-rank", o->q_lora_rank, "q_lora_rank (longcat_flash)");
  init_cmd->add_option("--kv-lora-rank", o->kv_lora_rank, "kv_lora_rank (longcat_flash)");
  init_cmd->add_option("--nope-dim", o->nope_dim, "qk_nope_head_dim (longcat_flash)");
  init_cmd->add_option("--rope-dim", o->rope_dim, "qk_rope_head_dim (longcat_flash)");
  init_cmd->add_option("--v-head-dim", o->v_head_dim, "v_head_dim (longcat_flash)");
  init_cmd->add_option("--pattern", o->pattern, "hybrid_override_pattern, one of M * - per layer (nemotron_h)");
  init_cmd->add_option("--mamba-heads", o->mamba_heads, "mamba_num_heads (nemotron_h)");
  init_cmd->add_option("--mamba-head-dim", o->mamba_head_dim, "mamba_head_dim (nemotron_h)");
  init_cmd->add_option("--groups", o->groups, "n_groups (nemotron_h)")->capture_default_str();
  init_cmd->add_option("--state", o->state, "ssm_state_size (nemotron_h)")->capture_default_str();
  init_cmd->add_option("--conv-kernel", o->conv_kernel, "conv_kernel (nemotron_h)")->capture_default_str();
  init_cmd->add_option("--chunk", o->chunk, "chunk_size (nemotron_h)")->capture_default_str();
  init_cmd->add_option("--dtype", o->dtype, "weights dtype: f32 or bf16")->capture_default_str();
  init_cmd->add_option("--scale", o->scale, "weights std is 0.02 x scale")->capture_default_str();
  init_cmd->add_option("--seed", o->seed, "random weights seed")->capture_default_str();
  init_cmd->add_flag("--exact", o->exact, "dyadic weights whose fp32 sums are exact");
  init_cmd->add_flag("--tie-embeddings", o->tie_embeddings, "tie lm_head to the embedding");
  init_cmd->add_option("--out", o->out, "output directory")->required();
  init_cmd->add_flag("--force", o->force, "overwrite a checkpoint already in --out");
  return {init_cmd, [o] { return Print("seam model init", seam::cli::RunModelInitCommand(*o)); }};
}

Command AddCheckCommand(CLI::App& parent) {
  auto o = std::make_shared<seam::cli::CheckCommandOptions>();
  CLI::App* check_cmd =
      parent.add_subcommand("check", "compare a TP group's logits and greedy tokens with a single rank (CPU over Gloo, "
                                  "or GPUs over NCCL with --device cuda)");
  check_cmd->add_option("--model", o->model_dir, "Hugging Face model directory")->required();
  check_cmd->add_option("--tp", o->tp, "tensor-parallel ranks")->capture_default_str();
  check_cmd->add_option("--attn-dp", o->attn_dp, "attention data-parallel groups")->capture_default_str();
  check_cmd->add_option("--pp", o->pp, "pipeline pieces (even layer ranges); tp 1 must match bitwise")
      ->capture_default_str();
  check_cmd->add_option("--policy", o->policy, "reduction policy: ar, rs, rsv, rs+rsv or auto")
      ->capture_default_str();
  check_cmd->add_option("--prompts", o->prompts, "prompts in the batch")->capture_default_str();
  check_cmd->add_option("--max-len", o->max_len, "longest prompt")->capture_default_str();
  check_cmd->add_option("--decode-steps", o->decode_steps, "greedy decode steps")->capture_default_str();
  check_cmd->add_option("--seed", o->seed, "prompt seed")->capture_default_str();
  check_cmd->add_option("--tolerance", o->tolerance, "max relative logits error")->capture_default_str();
  check_cmd->add_option("--device", o->device, "cpu or cuda (piece k's TP rank r on GPU k*tp + r when there are "
                                                  "enough GPUs; the single-rank reference on GPU 0)")
      ->check(CLI::IsMember({"cpu", "cuda"}))
      ->capture_default_str();
  check_cmd->add_option("--dtype", o->dtype, "compute and weight dtype of both sides: f32 or bf16")
      ->check(CLI::IsMember({"f32", "bf16"}))
      ->capture_default_str();
  check_cmd->add_option("--cp", o->cp,
                        "context-parallel ranks of the checked group (without attention DP; attention TP is tp / cp); "
                        "with --variant auto every prefill runs context-parallel")
      ->capture_default_str();
  check_cmd->add_option("--variant", o->variant,
                        "the checked group's batch variants: auto (per batch), sequence-parallel, context-parallel "
                        "(every prefill), or ordinary, unpadded, input-scattered for every batch")
      ->check(CLI::IsMember({"auto", "sequence-parallel", "sp", "context-parallel", "cp", "ordinary", "unpadded",
                              "input-scattered"}))
      ->capture_default_str();
  check_cmd->add_option("--allreduce-fusion", o->allreduce_fusion,
                        "CUDA bf16 TP groups: the one-shot IPC all-reduce + add + RMSNorm at stage inputs: off, auto "
                        "(where a start-up measurement finds it no slower) or always")
      ->check(CLI::IsMember({"off", "auto", "always"}))
      ->capture_default_str();
  return {check_cmd, [o] { return Report("seam check", seam::cli::RunCheckCommand(*o, std::cout)); }};
}

Command AddLogitsCommand(CLI::App& parent) {
  auto o = std::make_shared<seam::cli::LogitsCommandOptions>();
  CLI::App* cmd = parent.add_subcommand("logits", "write one rank's logits for given prompts (prefill rows, then "
                                                  "greedy or forced decode steps) to PREFIX.bin and PREFIX.json");
  cmd->add_option("--model", o->model_dir, "Hugging Face model directory")->required();
  cmd->add_option("--prompts", o->prompts, "JSON file: an array of prompts, each an array of token ids")->required();
  cmd->add_option("--forced", o->forced, "JSON file: per prompt the tokens decode steps 1.. are fed (default: the "
                                         "greedy ones)");
  cmd->add_option("--new-tokens", o->new_tokens, "rows after the prefill (its last row, then decode steps)")
      ->capture_default_str();
  cmd->add_option("--device", o->device, "cpu or cuda (GPU 0)")
      ->check(CLI::IsMember({"cpu", "cuda"}))
      ->capture_default_str();
  cmd->add_option("--dtype", o->dtype, "weights and compute: f32 or bf16")
      ->check(CLI::IsMember({"f32", "bf16"}))
      ->capture_default_str();
  cmd->add_option("--out", o->out, "output prefix: PREFIX.bin (float32 rows) and PREFIX.json")->required();
  return {cmd, [o] { return Report("seam logits", seam::cli::RunLogitsCommand(*o, std::cout)); }};
}

Command AddBenchModelCommand(CLI::App& parent) {
  auto o = std::make_shared<seam::cli::BenchModelOptions>();
  CLI::App* bench_model_cmd = parent.add_subcommand("model", "prefill/decode tokens/s on CPU ranks, TP 1 vs TP 2");
  bench_model_cmd->add_option("--model", o->model_dir, "model directory (default: a random qwen3)");
  bench_model_cmd->add_option("--hidden", o->hidden, "hidden size of the random model")->capture_default_str();
  bench_model_cmd->add_option("--layers", o->layers, "layers of the random model")->capture_default_str();
  bench_model_cmd->add_option("--batch", o->batch, "sequences")->capture_default_str();
  bench_model_cmd->add_option("--prompt-len", o->prompt_len, "prefill tokens per sequence")
      ->capture_default_str();
  bench_model_cmd->add_option("--decode-steps", o->decode_steps, "decode steps")->capture_default_str();
  bench_model_cmd->add_option("--repeats", o->repeats, "best of N")->capture_default_str();
  bench_model_cmd->add_option("--json", o->json_out, "also write results as JSON to this file");
  return {bench_model_cmd, [o] { return Report("seam bench model", seam::cli::RunBenchModelCommand(*o, std::cout)); }};
}

Command AddBenchPipelineCommand(CLI::App& parent) {
  auto o = std::make_shared<seam::cli::BenchPipelineOptions>();
  CLI::App* bench_pp_cmd = parent.add_subcommand(
      "pipeline", "handoff MiB/s vs ucx_perftest; local pipeline tokens/s at PP 1..N vs ideal");
  bench_pp_cmd->add_flag("--quick", o->quick, "few iterations, tiny model and workload (smoke test)");
  bench_pp_cmd->add_option("--max-pp", o->max_pp, "pipeline stages up to")->capture_default_str();
  bench_pp_cmd->add_option("--requests", o->requests, "concurrent requests")->capture_default_str();
  bench_pp_cmd->add_option("--prompt-len", o->prompt_len, "prompt tokens")->capture_default_str();
  bench_pp_cmd->add_option("--new-tokens", o->new_tokens, "generated tokens")->capture_default_str();
  bench_pp_cmd->add_option("--layers", o->layers, "layers of the random qwen3")->capture_default_str();
  bench_pp_cmd->add_option("--hidden", o->hidden, "hidden size")->capture_default_str();
  bench_pp_cmd->add_option("--ucx-mode", o->ucx_mode, "pipeline stage transport: tcp or shm")
      ->capture_default_str();
  bench_pp_cmd->add_option("--json", o->json_out, "also write results as JSON to this file");
  return {bench_pp_cmd, [o] { return Report("seam bench pipeline", seam::cli::RunBenchPipelineCommand(*o, std::cout)); }};
}

Command AddBenchServeCommand(CLI::App& parent) {
  auto o = std::make_shared<seam::cli::BenchServeOptions>();
  CLI::App* bench_serve_cmd = parent.add_subcommand(
      "serve", "served tokens/s, ms/step, TTFT and ITL of a local pipeline vs in-process decode and the weight floor");
  bench_serve_cmd->add_option("--logs-dir", o->logs_dir, "keep the pipeline's logs in this directory");
  bench_serve_cmd->add_option("--model", o->model_dir, "model directory (default: a random qwen3)");
  bench_serve_cmd->add_option("--hidden", o->hidden, "hidden size of the random model")->capture_default_str();
  bench_serve_cmd->add_option("--layers", o->layers, "layers of the random model")->capture_default_str();
  bench_serve_cmd->add_option("--heads", o->heads, "attention heads of the random model")->capture_default_str();
  bench_serve_cmd->add_option("--kv-heads", o->kv_heads, "KV heads of the random model")->capture_default_str();
  bench_serve_cmd->add_option("--head-dim", o->head_dim, "head dim of the random model (0: hidden / heads)")
      ->capture_default_str();
  bench_serve_cmd->add_option("--intermediate", o->intermediate, "FFN size of the random model (0: 3 x hidden)")
      ->capture_default_str();
  bench_serve_cmd->add_option("--vocab", o->vocab, "vocabulary of the random model")->capture_default_str();
  bench_serve_cmd->add_option("--pp", o->pp, "pipeline stages (seam-stage processes)")->capture_default_str();
  bench_serve_cmd->add_option("--tp", o->tp, "tensor-parallel ranks per stage")->capture_default_str();
  bench_serve_cmd->add_option("--attn-dp", o->attn_dp, "attention data-parallel groups")->capture_default_str();
  bench_serve_cmd->add_option("--device", o->device, "cpu or cuda")
      ->check(CLI::IsMember({"cpu", "cuda"}))
      ->capture_default_str();
  bench_serve_cmd->add_option("--dtype", o->dtype, "f32 or bf16")
      ->check(CLI::IsMember({"f32", "bf16"}))
      ->capture_default_str();
  bench_serve_cmd->add_option("--batch", o->batch, "concurrent sequences, a list: one row each")
      ->capture_default_str();
  bench_serve_cmd->add_option("--prompt-len", o->prompt_len, "prompt tokens")->capture_default_str();
  bench_serve_cmd->add_option("--new-tokens", o->new_tokens, "generated tokens per sequence")
      ->capture_default_str();
  bench_serve_cmd->add_option("--warmup", o->warmup, "untimed rounds before each timed one")
      ->capture_default_str();
  bench_serve_cmd->add_flag("--quick", o->quick, "tiny model and workload (smoke test)");
  bench_serve_cmd->add_option("--json", o->json_out, "also write the figures as JSON to this file");
  bench_serve_cmd->add_option("--stage-arg", o->stage_args, "extra seam-stage argument (repeat), e.g. "
                                                                      "--stage-arg=--allreduce-fusion=off")
      ->allow_extra_args(false);
  bench_serve_cmd->add_option("--coordinator-arg", o->coordinator_args,
                              "extra seam-coordinator argument (repeat), e.g. --coordinator-arg=--kv-blocks=4096")
      ->allow_extra_args(false);
  return {bench_serve_cmd, [o] { return Report("seam bench serve", seam::cli::RunBenchServeCommand(*o, std::cout)); }};
}

Command AddBenchLoad(CLI::App& parent) {
  auto o = std::make_shared<seam::cli::BenchLoadOptions>();
  CLI::App* cmd = seam::cli::AddBenchLoadCommand(parent, *o);
  return {cmd, [o] { return Report("seam bench load", seam::cli::RunBenchLoadCommand(*o, std::cout)); }};
}

Command AddRunCommand(CLI::App& parent) {
  auto o = std::make_shared<seam::cli::RunCommandOptions>();
  CLI::App* run_cmd = parent.add_subcommand("run", "a local pipeline of seam-stage processes (CPU, or CUDA with --device) and a seam-coordinator, "
                                                "checked against a single-process run");
  run_cmd->add_option("--model", o->model_dir, "Hugging Face model directory (default: a small random qwen3)");
  run_cmd->add_option("--pp", o->pp, "pipeline stages (seam-stage processes)")->capture_default_str();
  run_cmd->add_option("--tp", o->tp, "tensor-parallel ranks per stage")->capture_default_str();
  run_cmd->add_option("--attn-dp", o->attn_dp, "attention data-parallel groups")->capture_default_str();
  run_cmd->add_option("--max-new-tokens", o->max_new_tokens, "greedy tokens per prompt")->capture_default_str();
  run_cmd->add_option("--prompts", o->prompts, "prompts to send, all in one request")->capture_default_str();
  run_cmd->add_option("--prompt-len", o->prompt_len,
                      "fixed (the fixed short prompts), or random token-id prompts of a length N, uniform:A:B "
                      "or longtail:MEDIAN:MAX")
      ->capture_default_str();
  run_cmd->add_option("--seed", o->seed, "seed of the random prompts")->capture_default_str();
  run_cmd->add_option("--shared-prefix", o->shared_prefix,
                      "prefix caching check: every prompt starts with these many shared tokens, then a second "
                      "round sends each prompt + its answer + one token (a next turn, mapping the cached blocks)")
      ->check(CLI::Range(0, 1 << 16))
      ->capture_default_str();
  run_cmd->add_option("--ucx-mode", o->ucx_mode, "stage-to-stage transport: tcp or shm")->capture_default_str();
  run_cmd->add_option("--device", o->device, "where stages and the reference compute: cpu or cuda (rank r on GPU r)")
      ->check(CLI::IsMember({"cpu", "cuda"}))
      ->capture_default_str();
  run_cmd->add_option("--dtype", o->dtype, "weights, activations and handoffs of the stages and the reference: f32 "
                                            "or bf16")
      ->check(CLI::IsMember({"f32", "bf16"}))
      ->capture_default_str();
  run_cmd->add_option("--allreduce-fusion", o->allreduce_fusion,
                      "CUDA bf16 TP groups: the one-shot IPC all-reduce + add + RMSNorm: off, auto or always")
      ->check(CLI::IsMember({"off", "auto", "always"}))
      ->capture_default_str();
  run_cmd->add_option("--reduction-policy", o->policy, "the stages' reduction policy: ar, rs, rsv, rs+rsv or auto")
      ->check(CLI::IsMember({"ar", "rs", "rsv", "rs+rsv", "auto"}))
      ->capture_default_str();
  run_cmd->add_option("--cp", o->cp, "context-parallel ranks in each stage's TP group (seam-stage --cp)")
      ->capture_default_str();
  run_cmd->add_option("--stage-arg", o->stage_args, "extra seam-stage argument (repeat), e.g. "
                                                     "--stage-arg=--handoff-transport=auto");
  run_cmd->add_option("--coordinator-arg", o->coordinator_args,
                      "extra seam-coordinator argument (repeat), e.g. --coordinator-arg=--prefill-chunk-tokens=3");
  run_cmd->add_option("--cp-min-rows", o->cp_min_rows,
                      "--variant auto with --cp > 1: prefill batches of this many rows run context-parallel")
      ->capture_default_str();
  run_cmd->add_option("--variant", o->variant,
                      "the stages' batch variants: auto (per batch), sequence-parallel, context-parallel (every "
                      "prefill), or ordinary, unpadded, input-scattered for every batch")
      ->check(CLI::IsMember({"auto", "sequence-parallel", "sp", "context-parallel", "cp", "ordinary", "unpadded",
                              "input-scattered"}))
      ->capture_default_str();
  run_cmd->add_option("--scatter-input-rows", o->scatter_input_rows,
                      "--variant auto: batches of this many rows in a DP group run input-scattered")
      ->capture_default_str();
  run_cmd->add_flag("--insecure", o->insecure,
                    "run the local pipeline without TLS and token (if certificate setup fails on this machine)");
  return {run_cmd, [o] { return Report("seam run", seam::cli::RunRunCommand(*o, std::cout)); }};
}

// `seam serve`'s flags, vLLM's spelling beside seam's where both name one knob.
void AddServeTopologyFlags(CLI::App* cmd, seam::cli::ServeCommandOptions& o) {
  cmd->add_option("model", o.model_dir, "local checkpoint folder (config.json, *.safetensors, tokenizer files); "
                                        "default: a small random qwen3");
  cmd->add_option("--model", o.model_dir, "the same as MODEL");
  cmd->add_option("--device", o.device, "auto (cuda when a GPU is visible, else cpu), cpu or cuda")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}))
      ->capture_default_str();
  cmd->add_option("--dtype", o.dtype, "auto (the checkpoint's torch_dtype; f16 runs as bf16), f32 or bf16")
      ->check(CLI::IsMember({"auto", "f32", "bf16"}))
      ->capture_default_str();
  cmd->add_option("--pp,--pipeline-parallel-size", o.pp, "pipeline stages (seam-stage processes; on fewer GPUs "
                                                         "than pp x tp the stages share GPUs 0..tp-1)")
      ->capture_default_str();
  cmd->add_option("--tp,--tensor-parallel-size", o.tp, "tensor-parallel ranks (GPUs) per stage")
      ->capture_default_str();
  cmd->add_option("--attn-dp", o.attn_dp, "attention data-parallel groups (must divide --tp)")->capture_default_str();
  cmd->add_option("--ucx-mode", o.ucx_mode, "stage-to-stage transport: tcp or shm")->capture_default_str();
}

void AddServeApiFlags(CLI::App* cmd, seam::cli::ServeCommandOptions& o) {
  cmd->add_option("--host", o.host, "address the gRPC and HTTP APIs listen on (beyond loopback only with TLS and "
                                    "a token, the default)")
      ->capture_default_str();
  cmd->add_option("--port", o.port, "coordinator gRPC port (0: any free one)")->capture_default_str();
  cmd->add_option("--port-file", o.port_file, "write the coordinator's port here once serving");
  cmd->add_option("--http-port", o.http_port, "OpenAI-compatible HTTP API port (0: any free one, -1: none)")
      ->capture_default_str();
  cmd->add_option("--served-model-name", o.served_model_name, "the model's name in the HTTP API (default: the "
                                                              "folder's name)");
  cmd->add_option("--api-key", o.api_key, "the bearer token clients send (default: a random one, printed file)");
  cmd->add_option("--api-key-file,--auth-token-file", o.api_key_file, "a file holding that token");
  cmd->add_option("--metrics-port", o.metrics_port,
                  "Prometheus /metrics of the coordinator on this 127.0.0.1 port, of each stage on a free one "
                  "(HTTPS with the pipeline's certificate unless --insecure; 0: any free one, -1: none)")
      ->capture_default_str();
  cmd->add_flag("--enable-metrics-on-api", o.metrics_on_api,
                "also serve the coordinator's /metrics on the HTTP API port (behind its token)");
  cmd->add_option("--logs-dir", o.logs_dir, "keep the processes' logs in this folder (they also stream to stderr)");
  cmd->add_flag("--insecure", o.insecure,
                "serve without TLS and token, loopback only (default: an ephemeral CA, certificates and token in "
                "the work dir, printed at start)");
}

void AddServeLimitFlags(CLI::App* cmd, seam::cli::ServeCommandOptions& o) {
  cmd->add_option("--gpu-memory-utilization", o.gpu_memory_utilization,
                  "share of each GPU's memory the stages may fill with weights, activations and KV cache (split "
                  "between stages that share a GPU; default: the stages' own)");
  cmd->add_option("--max-model-len", o.max_model_len,
                  "longest context (prompt + generated); lowers what the stages' KV holds, never raises it");
  cmd->add_option("--max-num-seqs", o.max_num_seqs,
                  "sequences running at once; lowers the stages' bound, never raises it");
}

Command AddServeCommand(CLI::App& parent) {
  auto o = std::make_shared<seam::cli::ServeCommandOptions>();
  CLI::App* serve_cmd = parent.add_subcommand(
      "serve", "serve MODEL (a local checkpoint folder) on the visible GPUs or the CPU until SIGINT/SIGTERM: "
               "gRPC and the OpenAI-compatible HTTP API");
  AddServeTopologyFlags(serve_cmd, *o);
  AddServeApiFlags(serve_cmd, *o);
  AddServeLimitFlags(serve_cmd, *o);
  return {serve_cmd, [o] { return Report("seam serve", seam::cli::RunServeCommand(*o, std::cout, std::cerr)); }};
}

// Client credentials of `seam generate` / `seam status`.
void AddClientSecurity(CLI::App* cmd, seam::security::ClientSecurityOptions& s) {
  cmd->add_option("--tls-ca", s.tls_ca_file, "PEM CA of the coordinator's certificate: connect over TLS");
  cmd->add_option("--auth-token-file", s.auth_token_file,
                  "file holding the coordinator's bearer token (sent as authorization: Bearer <token>)");
  cmd->add_option("--tls-client-cert", s.tls_client_cert_file, "PEM certificate for mutual TLS");
  cmd->add_option("--tls-client-key", s.tls_client_key_file, "PEM private key of --tls-client-cert");
}


Command AddGenerateCommand(CLI::App& parent) {
  auto o = std::make_shared<seam::cli::GenerateCommandOptions>();
  CLI::App* gen_cmd = parent.add_subcommand(
      "generate", "send text or token-id prompts to a seam-coordinator; print the text or tokens");
  gen_cmd->alias("submit");
  gen_cmd->add_option("--addr", o->addr, "coordinator HOST:PORT")->required();
  gen_cmd->add_option("--prompt", o->prompts, "token ids, e.g. \"3 14 15\" (repeat for a batch)");
  gen_cmd->add_option("text", o->text_prompts,
                      "prompts as text, tokenized by the coordinator with the model's tokenizer (one or more)");
  gen_cmd->add_option("--max-new-tokens", o->max_new_tokens, "tokens per prompt")->capture_default_str();
  gen_cmd->add_option("--temperature", o->temperature, "0: greedy")->capture_default_str();
  gen_cmd->add_option("--top-k", o->top_k, "0: off")->capture_default_str();
  gen_cmd->add_option("--top-p", o->top_p, "1: off")->capture_default_str();
  gen_cmd->add_option("--seed", o->seed, "sampling seed (default: a fresh one per call)");
  gen_cmd->add_flag("--stream", o->stream, "use the streaming Generate call (text mode prints pieces as they come)");
  gen_cmd->add_flag("--json", o->json, "print one JSON document");
  gen_cmd->add_option("--timeout", o->timeout_s, "call deadline in seconds")->capture_default_str();
  AddClientSecurity(gen_cmd, o->security);
  return {gen_cmd, [o] { return Report("seam generate", seam::cli::RunGenerateCommand(*o, std::cout)); }};
}

Command AddStatusCommand(CLI::App& parent) {
  auto o = std::make_shared<seam::cli::StatusCommandOptions>();
  CLI::App* stat_cmd = parent.add_subcommand("status", "a seam-coordinator's health, model, topology and stages");
  stat_cmd->add_option("--addr", o->addr, "coordinator HOST:PORT")->required();
  stat_cmd->add_flag("--json", o->json, "print JSON");
  stat_cmd->add_option("--timeout", o->timeout_s, "call deadline in seconds")->capture_default_str();
  AddClientSecurity(stat_cmd, o->security);
  return {stat_cmd, [o] { return Report("seam status", seam::cli::RunStatusCommand(*o, std::cout)); }};
}

// The deepest subcommand the command line reached.
CLI::App* DeepestParsed(CLI::App* app) {
  for (CLI::App* sub : app->get_subcommands()) {
    if (sub->parsed()) return DeepestParsed(sub);
  }
  return app;
}

// The long flags `app` takes, its parents' included (they fall through).
std::vector<std::string> FlagNames(const CLI::App* app) {
  std::vector<std::string> names;
  for (const CLI::App* a = app; a != nullptr; a = a->get_parent()) {
    for (const CLI::Option* opt : a->get_options()) {
      for (const std::string& n : opt->get_lnames()) names.push_back("--" + n);
    }
  }
  return names;
}

// The first word of the command line `app` does not know, with the nearest
// one it does; "" when every word is known.
std::string Suggestion(CLI::App& app, int argc, char** argv) {
  CLI::App* at = DeepestParsed(&app);
  const std::vector<std::string> flags = FlagNames(at);
  std::vector<std::string> commands;
  for (CLI::App* sub : at->get_subcommands([](CLI::App*) { return true; })) commands.push_back(sub->get_name());
  const auto known = [](const std::vector<std::string>& names, const std::string& w) {
    return std::find(names.begin(), names.end(), w) != names.end();
  };
  std::string path;
  for (const CLI::App* p = at; p->get_parent() != nullptr; p = p->get_parent()) path = " " + p->get_name() + path;
  path = "seam" + path;
  for (int i = 1; i < argc; ++i) {
    std::string word = argv[i];
    if (word.rfind("--", 0) == 0) {
      word = word.substr(0, word.find('='));
      if (known(flags, word)) continue;
      const std::string near = seam::cli::NearestName(word, flags);
      return "unknown flag " + word + (near.empty() ? "" : " (did you mean " + near + "?)") + "; `" + path +
             " --help` lists them";
    }
    if (commands.empty() || word.empty() || word[0] == '-' || known(commands, word)) continue;
    const std::string near = seam::cli::NearestName(word, commands);
    if (!near.empty()) return "unknown command " + word + " (did you mean " + near + "?)";
  }
  return "";
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"seam: serves transformer language models split into pipeline stages"};
  app.set_version_flag("--version", std::string("seam ") + SEAM_VERSION);
  app.require_subcommand(1);
  app.fallthrough();  // inherited: the global flags work after any subcommand too
  std::string log_level = "info", log_format = "text";
  app.add_option("--log-level", log_level,
                 "trace, debug, info, warn or error (also for the seam-stage and seam-coordinator processes "
                 "that run, serve and bench start)")
      ->capture_default_str();
  app.add_option("--log-format", log_format, "text or json (one JSON object per line); passed on like --log-level")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
  CLI::App& model = *app.add_subcommand("model", "model checkpoints");
  CLI::App& bench = *app.add_subcommand("bench", "benchmarks (ratios against a baseline of the same run)");
  model.require_subcommand(1);
  bench.require_subcommand(1);
  const std::vector<Command> commands = {
      AddPlanCommand(app),         AddDemoCommand(app),           AddModelInitCommand(model),
      AddCheckCommand(app),        AddBenchModelCommand(bench),   AddBenchPipelineCommand(bench),
      AddBenchServeCommand(bench), AddBenchLoad(bench),           AddRunCommand(app),
      AddServeCommand(app),        AddGenerateCommand(app),       AddStatusCommand(app),
      AddLogitsCommand(app),
  };
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() != 0) {
      if (const std::string hint = Suggestion(app, argc, argv); !hint.empty()) {
        std::cerr << "seam: " << hint << "\n";
        return 2;
      }
    }
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
  for (const Command& c : commands) {
    if (c.app->parsed()) return c.run();
  }
  return 2;
}
