// CheckServeFlags, CheckModelDir and PlanServe (serve_setup.h).
#include "serve_setup.h"

#include <unistd.h>

#include <filesystem>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "seam/core/device_memory.h"
#include "seam/security/listen_address.h"
#include "seam/security/secret_files.h"
#include "seam/weights/model_config.h"

namespace seam::cli {
namespace {

// The last component of a model folder's path ("/data/Qwen3-0.6B/" -> "Qwen3-0.6B").
std::string FolderName(const std::string& dir) {
  std::filesystem::path p = std::filesystem::path(dir).lexically_normal();
  if (!p.has_filename()) p = p.parent_path();
  const std::string name = p.filename().string();
  return name.empty() ? "model" : name;
}

// "org/name" that is not a path here: what a hub id looks like.
bool LooksLikeHubId(const std::string& model) {
  const size_t slash = model.find('/');
  return slash != std::string::npos && slash > 0 && model.find('/', slash + 1) == std::string::npos &&
         model[0] != '.' && model[0] != '~';
}

// The names a client beyond loopback reaches --host by: the host itself,
// or for a wildcard (0.0.0.0, ::) this machine's host name.
std::vector<std::string> ServerNames(const std::string& host) {
  if (host != "0.0.0.0" && host != "::" && host != "[::]" && !host.empty()) return {host};
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0 || name[0] == '\0') return {};
  return {name};
}

absl::Status CheckRanges(const ServeCommandOptions& o) {
  if (o.pp < 1) return absl::InvalidArgumentError(absl::StrCat("--pp (--pipeline-parallel-size) ", o.pp, ": must be >= 1"));
  if (o.tp < 1) return absl::InvalidArgumentError(absl::StrCat("--tp (--tensor-parallel-size) ", o.tp, ": must be >= 1"));
  if (o.attn_dp < 1 || o.tp % o.attn_dp != 0) {
    return absl::InvalidArgumentError(absl::StrCat("--attn-dp ", o.attn_dp, ": must divide --tp ", o.tp));
  }
  for (const auto& [port, flag, least] : {std::tuple{o.port, "--port", 0}, std::tuple{o.http_port, "--http-port", -1},
                                          std::tuple{o.metrics_port, "--metrics-port", -1}}) {
    if (port < least || port > 65535) {
      return absl::InvalidArgumentError(absl::StrCat(flag, " ", port, ": must be within ", least, "..65535"));
    }
  }
  if (o.gpu_memory_utilization < 0 || o.gpu_memory_utilization > 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--gpu-memory-utilization ", o.gpu_memory_utilization, ": must be within (0, 1]"));
  }
  if (o.max_model_len < 0 || o.max_num_seqs < 0) {
    return absl::InvalidArgumentError("--max-model-len and --max-num-seqs must be >= 1 (0: what the stages report)");
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckServeFlags(const ServeCommandOptions& o) {
  if (absl::Status s = CheckRanges(o); !s.ok()) return s;
  if (!security::IsLoopbackHost(o.host) && o.insecure) {
    return absl::InvalidArgumentError(absl::StrCat("--host ", o.host,
                                                   ": beyond loopback seam serve runs only with TLS and a token; "
                                                   "drop --insecure"));
  }
  if (o.insecure && (!o.api_key.empty() || !o.api_key_file.empty())) {
    return absl::InvalidArgumentError("--api-key / --api-key-file: a token is sent only over TLS; drop --insecure");
  }
  if (!o.api_key.empty() && !o.api_key_file.empty()) {
    return absl::InvalidArgumentError("--api-key and --api-key-file: give one of them");
  }
  if (o.metrics_on_api && o.http_port < 0) {
    return absl::InvalidArgumentError("--enable-metrics-on-api: the HTTP API is off (--http-port -1)");
  }
  return absl::OkStatus();
}

absl::Status CheckModelDir(const std::string& model_dir) {
  std::error_code ec;
  if (!std::filesystem::is_directory(model_dir, ec)) {
    if (LooksLikeHubId(model_dir) && !std::filesystem::exists(model_dir, ec)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "MODEL ", model_dir, ": no such directory; seam loads local checkpoints only (download it first, e.g. "
          "`huggingface-cli download ", model_dir, " --local-dir DIR`, then `seam serve DIR`)"));
    }
    return absl::InvalidArgumentError(absl::StrCat("MODEL ", model_dir, ": not a directory (seam serves a local "
                                                   "checkpoint folder with config.json and *.safetensors)"));
  }
  absl::StatusOr<weights::ModelConfig> config = weights::LoadModelConfig(model_dir);
  if (!config.ok()) return absl::InvalidArgumentError(absl::StrCat("MODEL ", model_dir, ": ", config.status().message()));
  return absl::OkStatus();
}

namespace {

// --device auto|cpu|cuda against the visible GPUs: "cpu" or "cuda".
absl::StatusOr<std::string> ChooseDevice(const ServeCommandOptions& o, int gpus) {
  const std::string device = o.device == "auto" ? (gpus > 0 ? "cuda" : "cpu") : o.device;
  if (device == "cuda" && gpus == 0) {
    return absl::InvalidArgumentError("--device cuda: no GPU is visible (or this build has no CUDA path)");
  }
  if (device == "cuda" && gpus < o.tp) {
    return absl::InvalidArgumentError(
        absl::StrCat("--tp (--tensor-parallel-size) ", o.tp, " needs ", o.tp, " GPUs; ", gpus, " visible"));
  }
  if (device == "cpu" && o.gpu_memory_utilization > 0) {
    return absl::InvalidArgumentError(
        "--gpu-memory-utilization sizes the KV cache on GPUs; the stages run on the CPU here (--device cpu)");
  }
  return device;
}

// --dtype auto: the checkpoint's torch_dtype (bf16 and f16 checkpoints run bf16).
absl::StatusOr<std::string> ChooseDtype(const ServeCommandOptions& o, const std::string& model_dir) {
  if (o.dtype != "auto") return o.dtype;
  absl::StatusOr<weights::ModelConfig> config = weights::LoadModelConfig(model_dir);
  if (!config.ok()) return config.status();
  return config->dtype == DType::kF32 ? std::string("f32") : std::string("bf16");
}

}  // namespace

absl::StatusOr<ServePlan> PlanServe(const ServeCommandOptions& o, const std::string& model_dir,
                                    const std::string& work) {
  ServePlan plan;
  plan.gpus = CudaDeviceCount();
  absl::StatusOr<std::string> device = ChooseDevice(o, plan.gpus);
  if (!device.ok()) return device.status();
  plan.device = *device;
  absl::StatusOr<std::string> dtype = ChooseDtype(o, model_dir);
  if (!dtype.ok()) return dtype.status();
  plan.dtype = *dtype;
  plan.model_name = o.served_model_name.empty() ? FolderName(model_dir) : o.served_model_name;
  LocalPipelineOptions& lp = plan.pipeline;
  lp.model_dir = model_dir;
  lp.work_dir = work;
  lp.logs_dir = o.logs_dir;
  lp.log_tails_in_errors = false;
  lp.pp = o.pp;
  lp.tp = o.tp;
  lp.attn_dp = o.attn_dp;
  lp.device = plan.device;
  lp.ucx_mode = o.ucx_mode;
  lp.insecure = o.insecure;
  lp.coordinator_listen = absl::StrCat(o.host, ":", o.port);
  lp.metrics_port = o.metrics_port;
  if (o.http_port >= 0) lp.http_listen = absl::StrCat(o.host, ":", o.http_port);
  if (!security::IsLoopbackHost(o.host)) lp.server_names = ServerNames(o.host);
  lp.extra_stage_args = {"--dtype", plan.dtype, "--served-model-name", plan.model_name};
  if (o.gpu_memory_utilization > 0) {  // stages that share their GPUs split it
    const bool shared = plan.gpus < o.pp * o.tp;
    lp.extra_stage_args.insert(lp.extra_stage_args.end(),
                               {"--kv-memory-fraction",
                                absl::StrFormat("%.4f", o.gpu_memory_utilization / (shared ? o.pp : 1))});
  }
  lp.extra_coordinator_args = {"--served-model-name", plan.model_name};
  if (o.max_model_len > 0) lp.extra_coordinator_args.insert(lp.extra_coordinator_args.end(), {"--max-model-len", absl::StrCat(o.max_model_len)});
  if (o.max_num_seqs > 0) lp.extra_coordinator_args.insert(lp.extra_coordinator_args.end(), {"--max-num-seqs", absl::StrCat(o.max_num_seqs)});
  if (o.metrics_on_api) lp.extra_coordinator_args.push_back("--metrics-on-http");
  lp.auth_token = o.api_key;
  if (!o.api_key_file.empty()) {
    absl::StatusOr<std::string> token = security::ReadTokenFile(o.api_key_file, "--api-key-file");
    if (!token.ok()) return absl::InvalidArgumentError(token.status().message());
    lp.auth_token = *token;
  }
  return plan;
}

}  // namespace seam::cli
