// StageDeclaration: the model-facing description of one compute stage
// (attention, mixer or FFN): how its output cooperates with the boundary's
// reduction decision, what its residual update and read can do, and (once the
// layer stack binds it) its place in the stack. A declaration never owns a
// norm or an execution plan.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "seam/boundary/layout.h"
#include "seam/boundary/residual_ops.h"

namespace seam::boundary {

class FusionProvider;

enum class StageKind : uint8_t { kAttention, kFfn };
const char* StageKindName(StageKind kind);

// How a producer's compute cooperates with the sum its output owes.
//   kAlwaysPartial  attention only: compute always returns a partial sum; finish()
//                   registers it and the next stage's input completes it.
//   kExitScoped     the exit completes the sum or carries it to the next input
//                   (every FFN; an attention declared as a mixer).
enum class ProducerReduction : uint8_t { kAlwaysPartial, kExitScoped };
const char* ProducerReductionName(ProducerReduction reduction);

// Where a bound declaration sits in its stack.
struct StagePlace {
  bool bound = false;
  int index = -1;           // position in the stack (0-based, local to this rank)
  int global_layer = -1;    // the layer that declared it
  bool terminal = false;    // last stage of the whole (pipeline-wide) stack
  bool has_producer = false;
  StageKind producer_kind = StageKind::kAttention;
  bool consumer_is_mixer = false;  // next stage is an exit-scoped attention
  std::string source;       // "file:line, append N of its layer stack"
  bool branch = false;          // a stage of a prepared branch (branch.h)
  bool prepared_entry = false;  // its first stage: entered through BranchInput only
};

struct StageDeclaration {
  StageKind kind = StageKind::kAttention;
  ProducerReduction reduction = ProducerReduction::kAlwaysPartial;
  bool gathers_attn_tp_input = true;  // attention: gather a scattered input before compute
  bool sparse = false;                // FFN: mixture of experts (sum group MOE_OUTPUT)
  bool output_complete = false;       // FFN: compute completes its own sum
  bool merges_branch = false;         // FFN: a prepared branch is merged into its output (its exit never writes the residual)
  // FFN whose output holds a part every rank computes (LoRA, a shared expert on
  // TP 1): it leaves its sum to the next input only when its fusion provider
  // accepts the batch (FusionProvider::CanDeferAllReduce), and only a TP sum.
  bool defers_only_with_provider = false;
  std::shared_ptr<const ResidualUpdate> update = PlainAddUpdate();
  ReadoutCaps readout_caps;           // capabilities of the consumer-side read
  StagePlace place;                   // filled when the stack binds this stage

  bool is_mixer() const { return kind == StageKind::kAttention && reduction == ProducerReduction::kExitScoped; }
  // The sum this stage's raw compute output owes.
  SumGroup owed_sum() const;
  std::string ToString() const;  // "attention(ALWAYS_PARTIAL)", "ffn(dense, EXIT_SCOPED)"
};

struct AttnDeclOptions {
  ProducerReduction reduction = ProducerReduction::kAlwaysPartial;
  bool gathers_attn_tp_input = true;
};
struct FfnDeclOptions {
  bool sparse = false;
  bool output_complete = false;
  bool merges_branch = false;
  bool defers_only_with_provider = false;
};

StageDeclaration DeclareAttn(AttnDeclOptions options = {});
StageDeclaration DeclareFfn(FfnDeclOptions options = {});

// Per-stage construction options. Each stage kind takes only some of them:
// an attention stage takes fusions and qkv_latent; an FFN takes only fusions.
struct StageOptions {
  std::shared_ptr<FusionProvider> fusions;
  std::function<void()> qkv_latent;  // attention input hook (latent QKV projection)
};
// INVALID_ARGUMENT naming the option when `kind` does not take it.
absl::Status ValidateOptions(StageKind kind, const StageOptions& options);

}  // namespace seam::boundary
