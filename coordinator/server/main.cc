// seam-coordinator: the executable's flags (its only CLI11 translation unit),
// parsed into CoordinatorServerOptions; everything else is
// RunCoordinatorServer.
#include <algorithm>
#include <iostream>

#include <CLI/CLI.hpp>

#include "absl/strings/str_split.h"
#include "seam/coordinator/scheduler_types.h"
#include "seam/core/logging.h"
#include "service/coordinator_server.h"

namespace {

using seam::coordinator::CoordinatorServerOptions;

// The flags that are text until ParseFlags turns them into the options.
struct CoordinatorFlags {
  std::string stages, stage_timeout = "10s", stage_timeout_per_token = "100ms", startup_timeout = "120s";
  std::string log_level = "info", log_format = "text", chunked_prefill = "on", prefix_caching = "on";
  std::string decode_run_past = "off";
  int64_t max_num_seqs = 0;
};

void AddPipelineFlags(CLI::App& app, CoordinatorFlags& f, CoordinatorServerOptions& o) {
  app.add_option("--stages", f.stages, "stage addresses in rank order, comma separated")->required();
  app.add_option("--model", o.model_dir, "Hugging Face model directory")->required();
  app.add_option("--tp", o.tp, "tensor-parallel ranks per stage")->capture_default_str();
  app.add_option("--attn-dp", o.attn_dp, "attention data-parallel groups")->capture_default_str();
  app.add_option("--layers", o.layers, "layer range per stage, e.g. 0-13,14-27 (default: even split)");
  app.add_option("--max-queue", o.max_queue, "sequences waiting for admission")->capture_default_str();
  app.add_option("--decode-steps", o.decode_steps,
                 "decode steps the stages may run per microbatch without a round trip to the coordinator, each "
                 "feeding the token the last chose (1: one step per microbatch); runs only while no request "
                 "waits for admission or prefill")
      ->check(CLI::Range(1, seam::coordinator::kMaxDecodeSteps))
      ->capture_default_str();
  app.add_option("--decode-run-past", f.decode_run_past,
                 "on: a multi-step run takes as many steps as the sequence with the most tokens left, the "
                 "others running past their last token (those tokens dropped; within the context and free KV); "
                 "off: as many as the sequence with the fewest left (on one H200 the 256-request closed loop "
                 "took the same time either way: the tail's rows run to the end instead of dropping out)")
      ->check(CLI::IsMember({"on", "off"}))
      ->capture_default_str();
  app.add_option("--decode-ramp-start", o.decode_ramp_start,
                 "most steps of a sequence's first multi-step run after its admission; later runs take at most "
                 "as many steps as it has made (0: --decode-steps, no ramp; 1: runs of 1, 2, 4, ... so a burst's "
                 "later arrivals join early)")
      ->check(CLI::Range(0, seam::coordinator::kMaxDecodeSteps))
      ->capture_default_str();
  app.add_option("--overlap-steps", o.overlap_steps,
                 "on: with one pipeline stage, the next microbatch is built and sent while one runs (decode rows "
                 "fed on the stage the token the running step chooses), so the stage never waits for the round "
                 "trip through the coordinator; auto: on with one stage that says it feeds them "
                 "(StageStatus.feeds_previous_token); on refuses more stages")
      ->check(CLI::IsMember({"on", "off", "auto"}))
      ->capture_default_str();
  app.add_option("--max-inflight-microbatches", o.max_inflight_microbatches,
                 "microbatches the stages hold at once: with more than the stages, one waits on a stage while "
                 "another runs, so the coordinator's round trip hides behind compute, and decode rows split "
                 "over them (0: one per stage)")
      ->check(CLI::Range(0, 64))
      ->capture_default_str();
  app.add_option("--delivery-threads", o.delivery_threads,
                 "threads that hand tokens and answers to the clients' streams, so that the thread scheduling "
                 "the stages never waits on them (0: that thread itself, between microbatches; -1: one per "
                 "four cores, 1 to 4)")
      ->check(CLI::Range(-1, 64))
      ->capture_default_str();
  app.add_option("--stage-timeout", f.stage_timeout,
                 "longest a stage may take to answer a microbatch: the floor, to which "
                 "--stage-timeout-per-token adds per token owed")
      ->capture_default_str();
  app.add_option("--stage-timeout-per-token", f.stage_timeout_per_token,
                 "added to --stage-timeout for each token of the microbatch and of those in flight ahead of it "
                 "(0: none); a dead or stopped stage is found by GetStatus probes within about 4 s regardless")
      ->capture_default_str();
  app.add_option("--startup-timeout", f.startup_timeout, "longest stage bring-up may take")->capture_default_str();
}

// What bounds a microbatch and a request comes from the stages; these only lower it.
void AddLimitFlags(CLI::App& app, CoordinatorFlags& f, CoordinatorServerOptions& o) {
  app.add_option("--kv-blocks", o.caps.kv_blocks,
                 "KV blocks per attention-DP group to admit against (default: the least the stages report; "
                 "a larger value is lowered to it)");
  app.add_option("--max-batch-tokens", o.caps.max_batch_tokens,
                 "token rows of one microbatch (prefill tokens plus one per decode step; default: the least "
                 "--max-step-tokens the stages report; a larger value is lowered to it)")
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--max-prompt-tokens", o.caps.max_prompt_tokens,
                 "longest prompt accepted (0: the stages' longest context less one with chunked prefill; without "
                 "it 2048, never more than a microbatch's token rows)")
      ->check(CLI::Range(0, 1 << 24))
      ->capture_default_str();
  app.add_option("--chunked-prefill", f.chunked_prefill,
                 "on: prompts are prefilled in chunks of --prefill-chunk-tokens, in microbatches beside the "
                 "running decode rows (a long prompt never stalls decode; prompts up to the context); off: each "
                 "prompt whole in one microbatch")
      ->check(CLI::IsMember({"on", "off"}))
      ->capture_default_str();
  app.add_option("--max-model-len", o.caps.max_context,
                 "longest context of a sequence, prompt + generated (default: the least the stages' KV holds; a "
                 "larger value is lowered to it)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 40));
  app.add_option("--max-num-seqs", f.max_num_seqs,
                 "sequences running at once over the attention-DP groups (default: the stages' bound, else none; "
                 "a larger value is lowered to it)")
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--prefix-caching", f.prefix_caching,
                 "on: full prompt blocks computed once are cached and shared by later prompts that start with "
                 "the same tokens (same cache_salt); their prefill computes only the rest. Off for models with "
                 "recurrent state per sequence (Nemotron-H)")
      ->check(CLI::IsMember({"on", "off"}))
      ->capture_default_str();
  app.add_flag_callback("--no-prefix-caching", [&f] { f.prefix_caching = "off"; }, "--prefix-caching off");
  app.add_option("--prefill-chunk-tokens", o.prefill_chunk_tokens,
                 "with --chunked-prefill on: most tokens of one prompt a microbatch prefills")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  app.add_option("--max-mixed-prefill-tokens", o.max_mixed_prefill_tokens,
                 "with --chunked-prefill on: most prefill tokens of a microbatch that also carries decode rows, "
                 "which bounds a decode row's wait behind prefill work (0: up to the microbatch's token rows)")
      ->check(CLI::Range(0, 1 << 20))
      ->capture_default_str();
  app.add_option("--itl-target-ms", o.itl_target_ms,
                 "with --chunked-prefill on: target time of a step that carries decode rows, in ms (0: none). The "
                 "coordinator fits the stages' step time to the steps it timed and gives such a step the prefill "
                 "tokens the fit predicts keep it within the target (at least 16; never more than the bounds "
                 "above). One stage: the decode rows' inter-token latency; P stages: about 1/P of it")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
}

void AddApiFlags(CLI::App& app, CoordinatorFlags& f, CoordinatorServerOptions& o) {
  app.add_option("--listen", o.listen, "client API address")->capture_default_str();
  app.add_option("--port-file", o.port_file, "write the bound port here once serving");
  app.add_option("--health-listen", o.health_listen,
                 "host:port of a plaintext port serving only grpc.health.v1 (for probes that cannot speak TLS)");
  app.add_option("--http-listen", o.http_listen,
                 "HOST:PORT of the OpenAI-compatible HTTP API (/v1/completions, /v1/chat/completions, /v1/models, "
                 "/health), with the same TLS and bearer token as gRPC");
  app.add_option("--http-port-file", o.http_port_file, "write the bound HTTP port here once serving");
  app.add_option("--served-model-name", o.served_model_name,
                 "the model's name in the HTTP API (default: the --model folder's name)");
  app.add_option("--metrics-listen", o.metrics_listen,
                 "host:port of a Prometheus /metrics endpoint: HTTPS with --tls-cert/--tls-key, else plain HTTP on "
                 "loopback only unless --insecure");
  app.add_flag("--metrics-on-http", o.metrics_on_http,
               "also serve /metrics on the HTTP API (--http-listen), behind its bearer token");
  app.add_option("--log-level", f.log_level, "trace, debug, info, warn or error")->capture_default_str();
  app.add_option("--log-format", f.log_format, "text or json (one JSON object per line)")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
}

void AddSecurityFlags(CLI::App& app, CoordinatorServerOptions& o) {
  seam::security::ServerSecurityOptions& server = o.server_security;
  app.add_option("--tls-cert", server.tls_cert_file, "PEM certificate chain: serve the client API over TLS");
  app.add_option("--tls-key", server.tls_key_file, "PEM private key of --tls-cert");
  app.add_option("--auth-token-file", server.auth_token_file,
                 "file holding the bearer token every client call must send (authorization: Bearer <token>); "
                 "grpc.health.v1 stays open");
  app.add_flag("--insecure", server.insecure,
               "allow plaintext on a non-loopback --listen and to non-loopback stages");
  seam::security::ClientSecurityOptions& stage = o.stage_security;
  app.add_option("--tls-ca", stage.tls_ca_file, "PEM CA of the stages' certificates: reach the stages over TLS");
  app.add_option("--tls-client-cert", stage.tls_client_cert_file,
                 "PEM certificate presented to the stages (their --tls-client-ca signed it)");
  app.add_option("--tls-client-key", stage.tls_client_key_file, "PEM private key of --tls-client-cert");
}

// The text flags into the options; false (the message written) when one does not parse.
bool ParseFlags(const CoordinatorFlags& f, CoordinatorServerOptions& o) {
  o.stages = absl::StrSplit(f.stages, ',', absl::SkipEmpty());
  o.caps.chunked_prefill = f.chunked_prefill == "on";
  o.decode_run_past = f.decode_run_past == "on";
  // Spread over the groups: each holds its share, rounded up.
  if (f.max_num_seqs > 0) o.caps.max_sequences_per_dp_group = (f.max_num_seqs + o.attn_dp - 1) / std::max(1, o.attn_dp);
  o.prefix_caching = f.prefix_caching == "on";
  if (f.stage_timeout_per_token == "0") o.stage_timeout_per_token = std::chrono::milliseconds(0);
  if (!seam::coordinator::ParseDuration(f.stage_timeout, &o.stage_timeout) ||
      !seam::coordinator::ParseDuration(f.startup_timeout, &o.startup_timeout) ||
      (f.stage_timeout_per_token != "0" &&
       !seam::coordinator::ParseDuration(f.stage_timeout_per_token, &o.stage_timeout_per_token))) {
    std::cerr << "seam-coordinator: durations look like 10s, 500ms or 2m\n";
    return false;
  }
  if (o.stages.empty()) {
    std::cerr << "seam-coordinator: --stages names no stage\n";
    return false;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"seam-coordinator: drives a pipeline of seam-stage servers and serves the client API"};
  CoordinatorFlags flags;
  CoordinatorServerOptions o;
  AddApiFlags(app, flags, o);
  AddPipelineFlags(app, flags, o);
  AddLimitFlags(app, flags, o);
  AddSecurityFlags(app, o);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }
  seam::LogFormat format = seam::LogFormat::kText;
  seam::ParseLogFormat(flags.log_format, &format);
  seam::InitLogging(flags.log_level, "coordinator", format);
  if (!ParseFlags(flags, o)) return 2;
  return seam::coordinator::RunCoordinatorServer(o, std::cerr);
}
