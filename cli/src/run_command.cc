// `seam run`: checkpoint, LocalPipeline, GenerateAll over gRPC, then the
// single-process greedy tokens from StageGroup + Generator for comparison.
#include "run_command.h"

#include <chrono>
#include <filesystem>
#include <algorithm>

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "command_status.h"
#include "grpc_client.h"
#include "load_workload.h"
#include "local_pipeline.h"
#include "prompt_requests.h"
#include "seam/boundary/ipc_fusion.h"
#include "seam/boundary/reduction_policy.h"
#include "seam/boundary/variant_choice.h"
#include "seam/core/status.h"
#include "seam/core/temp_dir.h"
#include "seam/runtime/generator.h"
#include "seam/runtime/stage_group.h"
#include "seam/v1/coordinator_service.grpc.pb.h"

namespace seam::cli {
namespace {

// `shared` tokens common to every prompt, then each fixed prompt.
std::vector<std::vector<int32_t>> FixedPrompts(int count, int64_t vocab, int shared) {
  const std::vector<std::vector<int32_t>> all = {
      {3, 14, 15, 92, 65}, {27, 18, 28, 18, 28, 45, 90, 45}, {11, 200, 7}, {42}, {99, 98, 97, 96, 95, 94}};
  std::vector<std::vector<int32_t>> out;
  for (int i = 0; i < count; ++i) {
    std::vector<int32_t> p;
    for (int j = 0; j < shared; ++j) p.push_back((j * 37 + 5) % 251);
    p.insert(p.end(), all[i % all.size()].begin(), all[i % all.size()].end());
    for (int32_t& t : p) t = static_cast<int32_t>(t % vocab);
    out.push_back(p);
  }
  return out;
}

// The prompts --prompt-len asks for: the fixed ones, or random token ids
// of the lengths it draws (load_workload.h, a plain workload).
absl::StatusOr<std::vector<std::vector<int32_t>>> Prompts(const RunCommandOptions& o, int64_t vocab) {
  if (o.prompt_len == "fixed") return FixedPrompts(o.prompts, vocab, o.shared_prefix);
  absl::StatusOr<LengthDistribution> length = ParseLengthDistribution(o.prompt_len);
  if (!length.ok()) return absl::InvalidArgumentError(absl::StrCat("--prompt-len: ", length.status().message()));
  if (o.shared_prefix > 0) return absl::InvalidArgumentError("--shared-prefix takes the fixed prompts (--prompt-len fixed)");
  WorkloadOptions w;
  w.sessions = o.prompts;
  w.prompt = *length;
  w.output = LengthDistribution{LengthDistribution::Kind::kFixed, o.max_new_tokens, o.max_new_tokens};
  w.vocab = vocab;
  w.seed = o.seed;
  absl::StatusOr<Workload> workload = GenerateWorkload(w);
  if (!workload.ok()) return absl::InvalidArgumentError(absl::StrCat("--prompt-len: ", workload.status().message()));
  std::vector<std::vector<int32_t>> out;
  for (const Session& s : workload->sessions) out.push_back(s.turns.at(0).user);
  return out;
}

absl::Status CheckFlags(const RunCommandOptions& o) {
  if (auto p = boundary::ParseReductionPolicy(o.policy); !p.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--reduction-policy: ", p.status().message()));
  }
  if (auto v = boundary::ParseVariantChoice(o.variant); !v.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--variant: ", v.status().message()));
  }
  if (o.pp < 1 || o.tp < 1 || o.attn_dp < 1 || o.tp % o.attn_dp != 0 || o.max_new_tokens < 1 || o.prompts < 1) {
    return absl::InvalidArgumentError(
        "--pp, --tp, --max-new-tokens and --prompts must be >= 1 and --attn-dp must divide --tp");
  }
  if (o.cp < 1 || (o.tp / o.attn_dp) % o.cp != 0 || (o.cp > 1 && o.attn_dp > 1) || o.cp_min_rows < 1) {
    return absl::InvalidArgumentError("--cp must divide --tp and runs without attention DP; --cp-min-rows >= 1");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<LocalPipeline>> StartPipeline(const RunCommandOptions& o, const std::string& model_dir,
                                                             const std::string& work, std::ostream& out) {
  LocalPipelineOptions lp;
  lp.model_dir = model_dir;
  lp.work_dir = work;
  lp.pp = o.pp;
  lp.tp = o.tp;
  lp.attn_dp = o.attn_dp;
  lp.ucx_mode = o.ucx_mode;
  lp.device = o.device;
  lp.extra_stage_args = {"--dtype", o.dtype, "--allreduce-fusion", o.allreduce_fusion,
                         "--reduction-policy", o.policy, "--batch-variant", o.variant,
                         "--scatter-input-rows", absl::StrCat(o.scatter_input_rows), "--cp", absl::StrCat(o.cp),
                         "--cp-min-rows", absl::StrCat(o.cp_min_rows)};
  lp.extra_stage_args.insert(lp.extra_stage_args.end(), o.stage_args.begin(), o.stage_args.end());
  lp.extra_coordinator_args = o.coordinator_args;
  lp.insecure = o.insecure;
  auto pipeline = LocalPipeline::Start(lp);
  if (!pipeline.ok()) return Failed("", pipeline.status());
  out << "pipeline: " << o.pp << " seam-stage x TP " << o.tp << " behind seam-coordinator at "
      << (*pipeline)->coordinator_address() << (o.insecure ? " without TLS" : " over TLS with a token")
      << " (logs in " << work << ")\n";
  return pipeline;
}

// A prompt as printed: whole up to 16 tokens, else its first 8 and its length.
std::string Shown(const std::vector<int32_t>& prompt) {
  if (prompt.size() <= 16) return absl::StrJoin(prompt, " ");
  return absl::StrCat(absl::StrJoin(prompt.begin(), prompt.begin() + 8, " "), " ... (", prompt.size(), " tokens)");
}

// The served tokens of `prompts`, greedy: every prompt in flight at once, in
// GenerateAll requests within the prompt count the coordinator states
// (prompt_requests.h); prints them and the throughput.
absl::StatusOr<std::vector<std::vector<int32_t>>> ServedTokens(LocalPipeline& pipeline, const RunCommandOptions& o,
                                                               const std::vector<std::vector<int32_t>>& prompts,
                                                               std::ostream& out) {
  auto stub = v1::Coordinator::NewStub(pipeline.ClientChannel());
  v1::SamplingParams sampling;
  sampling.set_temperature(0);
  sampling.set_max_new_tokens(o.max_new_tokens);
  size_t prompt_tokens = 0;
  for (const std::vector<int32_t>& p : prompts) prompt_tokens += p.size();
  // A minute, and more for long loads (a CPU pipeline makes tokens slowly).
  const auto deadline = std::chrono::system_clock::now() + std::chrono::seconds(60) +
                        std::chrono::milliseconds(prompt_tokens + 20 * prompts.size() * o.max_new_tokens);
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<PromptRequestsResult> served = GenerateAllInRequests(*stub, prompts, sampling, "seam-run", deadline);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!served.ok()) {
    return absl::Status(served.status().code(),
                        absl::StrCat(served.status().message(), "\n", pipeline.LogTails(15)));
  }
  const std::vector<std::vector<int32_t>>& got = served->tokens;
  size_t generated = 0;
  for (size_t i = 0; i < prompts.size(); ++i) {
    generated += got[i].size();
    out << "prompt " << i << " [" << Shown(prompts[i]) << "] -> [" << absl::StrJoin(got[i], " ") << "]\n";
  }
  out << "throughput: " << generated << " generated tokens in " << absl::StrFormat("%.3f", seconds) << " s ("
      << absl::StrFormat("%.1f", seconds > 0 ? generated / seconds : 0.0) << " tokens/s; wall time of "
      << served->requests << " GenerateAll requests sent together, " << prompts.size() << " prompts in all, at most "
      << served->prompts_per_request << " per request as the coordinator states)\n";
  return std::move(served->tokens);
}

// What the stages logged about their choices: each batch variant the first
// time they ran it, and the transport each handoff link settled on.
void PrintStageChoices(const LocalPipeline& pipeline, std::ostream& out) {
  for (const std::string& line : pipeline.LogLines("batch variant ")) {
    const size_t at = line.find("batch variant ");
    if (line.find("first used", at) != std::string::npos) out << "stage: " << line.substr(at) << "\n";
  }
  for (const std::string& line : pipeline.LogLines("handoff link from pipeline rank ")) {
    out << "stage: " << line.substr(line.find("handoff link from pipeline rank ")) << "\n";
  }
}

// The single-process group's greedy tokens of `prompts`, ordinary batches.
absl::StatusOr<std::vector<std::vector<int32_t>>> ReferenceTokens(const RunCommandOptions& o,
                                                                  const std::string& model_dir,
                                                                  const std::vector<std::vector<int32_t>>& prompts) {
  runtime::StageGroupOptions reference;
  reference.device = o.device == "cuda" ? Device::Kind::kCUDA : Device::Kind::kCPU;
  reference.model.dtype = reference.cache.dtype = o.dtype == "bf16" ? DType::kBF16 : DType::kF32;
  // The pipeline has stopped: on a GPU the reference's cache takes the memory a stage's would.
  reference.kv.from_gpu_memory = reference.device == Device::Kind::kCUDA;
  reference.allreduce_fusion.mode = *boundary::ParseAllReduceFusionMode(o.allreduce_fusion);
  reference.variants = *boundary::ParseVariantChoice("ordinary");
  auto group = runtime::StageGroup::Create(model_dir, o.tp, o.attn_dp, boundary::ReductionPolicy::kAuto, reference);
  if (!group.ok()) return Failed("single-process group: ", group.status());
  runtime::Generator generator(group->get());
  runtime::GenerationOptions g;
  g.max_new_tokens = o.max_new_tokens;
  g.eos_token_id = -1;  // the pipeline run had no stop tokens
  g.decode_groups = o.pp;  // the coordinator spreads decode over pp microbatches in flight
  auto want = generator.Generate(prompts, g);
  if (!want.ok()) return Failed("single-process run: ", want.status());
  return want->tokens;
}

}  // namespace

absl::Status RunRunCommand(const RunCommandOptions& o, std::ostream& out) {
  SEAM_RETURN_IF_ERROR(CheckFlags(o));
  absl::StatusOr<std::string> made = MakeTempDir("seam-run-");
  if (!made.ok()) return Failed("", made.status());
  const std::string work = *made;
  absl::StatusOr<std::string> model = ModelDirOrDefault(o.model_dir, work, out);
  if (!model.ok()) return Failed("", model.status());
  const std::string model_dir = *model;
  absl::StatusOr<weights::ModelConfig> config = weights::LoadModelConfig(model_dir);
  if (!config.ok()) return absl::InvalidArgumentError(config.status().ToString());  // --model
  SEAM_ASSIGN_OR_RETURN(const std::vector<std::vector<int32_t>> prompts, Prompts(o, config->vocab_size));
  SEAM_ASSIGN_OR_RETURN(std::unique_ptr<LocalPipeline> pipeline, StartPipeline(o, model_dir, work, out));
  // With a shared prefix, a second round: each prompt followed by its
  // answer and one more token (a conversation's next turn), which maps the
  // cached blocks of both.
  std::vector<std::vector<std::vector<int32_t>>> asked = {prompts}, rounds;
  SEAM_ASSIGN_OR_RETURN(std::vector<std::vector<int32_t>> first, ServedTokens(*pipeline, o, prompts, out));
  rounds.push_back(std::move(first));
  if (o.shared_prefix > 0) {
    std::vector<std::vector<int32_t>> next = prompts;
    for (size_t i = 0; i < next.size(); ++i) {
      next[i].insert(next[i].end(), rounds[0][i].begin(), rounds[0][i].end());
      next[i].push_back(static_cast<int32_t>(7 % config->vocab_size));
    }
    SEAM_ASSIGN_OR_RETURN(std::vector<std::vector<int32_t>> second, ServedTokens(*pipeline, o, next, out));
    asked.push_back(std::move(next));
    rounds.push_back(std::move(second));
  }
  PrintStageChoices(*pipeline, out);
  pipeline->Stop();
  for (const std::string& line : pipeline->LogLines("prefix cache: ")) {
    out << "coordinator: " << line.substr(line.find("prefix cache: ")) << "\n";
  }
  bool match = true;
  // Agreement (for bf16, where batch shapes change the arithmetic): prompts
  // whose tokens all equal, and tokens before each prompt's first difference.
  size_t equal_prompts = 0, agreed = 0, total = 0;
  for (size_t r = 0; r < rounds.size(); ++r) {
    SEAM_ASSIGN_OR_RETURN(const std::vector<std::vector<int32_t>> want, ReferenceTokens(o, model_dir, asked[r]));
    const std::vector<std::vector<int32_t>>& got = rounds[r];
    for (size_t i = 0; i < prompts.size(); ++i) {
      size_t same = 0;
      while (same < want[i].size() && same < got[i].size() && want[i][same] == got[i][same]) ++same;
      agreed += same;
      total += want[i].size();
      if (want[i] == got[i]) {
        ++equal_prompts;
        continue;
      }
      match = false;
      out << "prompt " << i << " single-process: [" << absl::StrJoin(want[i], " ") << "] (first difference at token "
          << same << ")\n";
    }
  }
  out << "agreement: " << equal_prompts << " of " << rounds.size() * prompts.size() << " prompts equal; " << agreed
      << " of " << total << " tokens before each prompt's first difference\n";
  out << (match ? "tokens match the single-process run" : "MISMATCH: tokens differ from the single-process run")
      << "\n";
  if (!match) {
    return absl::InternalError(absl::StrCat("tokens differ from the single-process run (logs in ", work, ")"));
  }
  std::filesystem::remove_all(work);
  return absl::OkStatus();
}

}  // namespace seam::cli
