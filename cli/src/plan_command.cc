// `seam plan`: a Qwen3-like stack (attention + FFN per layer) bound inside a
// LayerStack for each TP rank; the printed plans of all ranks must agree.
// --arch longcat adds to each layer's MoE a prepared branch (dense FFN,
// attention, dense FFN) merged back into its output, printed after it;
// --arch qwen3_moe gives the last layer's MoE the provider the model gives
// it, so its exit may hand the finalize to the final norm. --reads picks the
// reads' capabilities (gathering reads, reads after the gather).
// --arch nemotron_h --pattern builds one stage per character, as
// NemotronHModel declares them: Mamba2 and attention as exit-scoped mixers
// that leave the gather of a scattered input to their compute, MLPs as FFNs.
#include "plan_command.h"

#include <deque>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "seam/boundary/branch.h"
#include "seam/boundary/deferred_finalize.h"
#include "seam/boundary/layer_stack.h"
#include "seam/boundary/plan_printer.h"
#include "seam/core/status.h"

namespace seam::cli {
namespace {

using boundary::StageItem;

// The bound boundaries of one rank's stack and the norms they point at.
struct BuiltStack {
  std::deque<boundary::NormParams> norms;
  std::vector<std::shared_ptr<boundary::StageBoundary>> boundaries;
};

absl::StatusOr<std::unique_ptr<BuiltStack>> BuildStack(const PlanCommandOptions& options,
                                                       const boundary::Topology& topology,
                                                       boundary::ReductionPolicy policy) {
  auto built = std::make_unique<BuiltStack>();
  boundary::FfnDeclOptions ffn;
  const bool longcat = options.arch == "longcat";
  ffn.sparse = options.arch == "qwen3_moe" || longcat;
  ffn.merges_branch = longcat;
  boundary::StageDeclaration attn = boundary::DeclareAttn();
  boundary::StageDeclaration ffn_decl = boundary::DeclareFfn(ffn);
  boundary::LayerStackOptions stack_options;
  stack_options.topology = topology;
  stack_options.policy = policy;
  if (options.reads == "gathering") {
    attn.readout_caps.gathering_reads = true;
    stack_options.final_read.gathering_reads = true;
  } else if (options.reads == "after-gather") {
    attn.readout_caps.reads_after_attn_tp_gather = true;
    ffn_decl.readout_caps.reads_before_dp_gather = false;
    stack_options.final_read.reads_after_attn_tp_gather = true;
  }
  boundary::LayerStack stack(std::move(stack_options));
  if (options.arch == "nemotron_h") {
    for (int l = 0; l < static_cast<int>(options.pattern.size()); ++l) {
      const bool mixer = options.pattern[l] != '-';
      const boundary::StageDeclaration decl =
          mixer ? boundary::DeclareAttn({boundary::ProducerReduction::kExitScoped, /*gathers_attn_tp_input=*/false})
                : boundary::DeclareFfn();
      SEAM_ASSIGN_OR_RETURN(auto appended, SEAM_APPEND_STAGES(l, StageItem{decl, &built->norms.emplace_back(), {}}));
      built->boundaries.insert(built->boundaries.end(), appended.begin(), appended.end());
    }
    SEAM_RETURN_IF_ERROR(stack.Close());
    return built;
  }
  for (int l = 0; l < options.layers; ++l) {
    boundary::NormParams* attn_norm = &built->norms.emplace_back();
    boundary::NormParams* ffn_norm = &built->norms.emplace_back();
    // Qwen3-MoE's last MoE may hand its finalize to the final norm (models/).
    boundary::StageOptions ffn_options;
    if (options.arch == "qwen3_moe" && l == options.layers - 1) {
      ffn_options.fusions = boundary::TerminalFinalizeProvider(nullptr);
    }
    SEAM_ASSIGN_OR_RETURN(auto appended,
                          SEAM_APPEND_STAGES(l, StageItem{attn, attn_norm, {}},
                                             StageItem{ffn_decl, ffn_norm, ffn_options}));
    built->boundaries.insert(built->boundaries.end(), appended.begin(), appended.end());
    if (longcat) {
      std::vector<StageItem> items;
      items.push_back(StageItem{boundary::DeclareFfn(), ffn_norm, {}});  // the MoE's norm: never applied twice
      for (int i = 0; i < 2; ++i) {
        items.push_back(StageItem{i == 0 ? boundary::DeclareAttn() : boundary::DeclareFfn(),
                                  &built->norms.emplace_back(), {}});
      }
      SEAM_ASSIGN_OR_RETURN(auto branch,
                            boundary::AppendBranchAt(__FILE__, __LINE__, l, *appended[1], std::move(items)));
      built->boundaries.insert(built->boundaries.end(), branch.begin(), branch.end());
    }
  }
  SEAM_RETURN_IF_ERROR(stack.Close());
  return built;
}

std::string Render(const BuiltStack& built, bool json) {
  std::vector<const boundary::StagePlan*> plans;
  for (const auto& b : built.boundaries) plans.push_back(&b->plan());
  return json ? boundary::PlanToJson(plans) : boundary::PlanToText(plans);
}

// Empty when the options are usable; otherwise the message naming the bad value.
std::string CheckArguments(const PlanCommandOptions& o) {
  if (o.tp < 1) return absl::StrCat("--tp must be at least 1, got ", o.tp);
  if (o.attn_dp < 1) return absl::StrCat("--attn-dp must be at least 1, got ", o.attn_dp);
  if (o.tp % o.attn_dp != 0) {
    return absl::StrCat("--attn-dp ", o.attn_dp, " does not divide --tp ", o.tp,
                        " (attention TP would be ", o.tp, "/", o.attn_dp, ")");
  }
  if (o.arch == "nemotron_h") {
    if (o.pattern.empty() || o.pattern.find_first_not_of("M*-") != std::string::npos) {
      return absl::StrCat("--arch nemotron_h needs --pattern of M (Mamba2), * (attention) and - (MLP), got '",
                          o.pattern, "'");
    }
    if (o.layers != 2 && o.layers != static_cast<int>(o.pattern.size())) {  // 2: the flag's default
      return absl::StrCat("--layers ", o.layers, " differs from --pattern's ", o.pattern.size(), " layers");
    }
  } else if (!o.pattern.empty()) {
    return "--pattern applies only to --arch nemotron_h";
  }
  if (o.layers < 1) return absl::StrCat("--layers must be at least 1, got ", o.layers);
  if (o.rank < -1 || o.rank >= o.tp) {
    return absl::StrCat("--rank ", o.rank, " is not a TP rank of --tp ", o.tp, " (0..", o.tp - 1, ")");
  }
  if (o.arch != "qwen3" && o.arch != "qwen3_moe" && o.arch != "longcat" && o.arch != "nemotron_h") {
    return absl::StrCat("unknown --arch '", o.arch,
                        "' (known: qwen3, qwen3_moe, longcat or longcat_flash, nemotron_h)");
  }
  if (o.reads != "plain" && o.reads != "gathering" && o.reads != "after-gather") {
    return absl::StrCat("unknown --reads '", o.reads, "' (known: plain, gathering, after-gather)");
  }
  return "";
}

}  // namespace

absl::StatusOr<std::string> RunPlanCommand(const PlanCommandOptions& given) {
  PlanCommandOptions options = given;
  if (options.arch == "longcat_flash") options.arch = "longcat";  // the checkpoint's name for the same stack
  if (std::string bad = CheckArguments(options); !bad.empty()) return absl::InvalidArgumentError(bad);
  absl::StatusOr<boundary::ReductionPolicy> parsed = boundary::ParseReductionPolicy(options.policy);
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown --policy '", options.policy, "' (known: ar, rs, rsv, rs+rsv, auto)"));
  }
  const boundary::ReductionPolicy policy = boundary::ResolveReductionPolicy(*parsed, options.arch);

  const int first = options.rank >= 0 ? options.rank : 0;
  const int end = options.rank >= 0 ? options.rank + 1 : options.tp;
  std::string reference;
  for (int rank = first; rank < end; ++rank) {
    absl::StatusOr<boundary::Topology> topology = boundary::Topology::Make(options.tp, options.attn_dp, rank);
    if (!topology.ok()) return absl::InvalidArgumentError(topology.status().message());
    absl::StatusOr<std::unique_ptr<BuiltStack>> built = BuildStack(options, *topology, policy);
    if (!built.ok()) {
      // The flags were checked: a stack that does not bind is seam's bug.
      return absl::InternalError(
          absl::StrCat("rank ", rank, " failed to bind its stack: ", built.status().ToString()));
    }
    std::string text = Render(**built, options.json);
    if (rank == first) {
      reference = std::move(text);
    } else if (text != reference) {
      return absl::InternalError(absl::StrCat("rank ", rank, "'s plan differs from rank ", first, "'s"));
    }
  }
  return reference;
}

}  // namespace seam::cli
