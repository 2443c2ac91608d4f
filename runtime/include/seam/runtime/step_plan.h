// StepPlan: what one step of a stage group does, decided before any rank
// runs. PlanStep is a pure function of the step (its sequences, the handoff
// it takes, what it returns) and of a read-only view of the group (its fixed
// facts, where its sequences live, what its caches hold); the plan it
// returns is plain data that ToString prints and tests compare, and
// StageGroup::Run executes it. Nothing is decided while a step runs.
//
// What a plan fixes:
//  - placement: each sequence on the attention-DP group the coordinator
//    named (SequenceStep::dp_group). The plan never places on its own: with
//    more than one DP group a sequence that names none is refused.
//  - rows: each DP group's sequences in input order, their token rows, and
//    each sequence's first row and first logits row in its group; each row
//    run is a prefill chunk or a decode token (RowKind), so a later plan may
//    mix both in one step.
//  - cache: the KV blocks and Mamba state slots each DP group must take.
//  - execution: a decode graph's replay (the bucket: sequences per DP
//    group), a mixed graph's (steps holding prefill chunks; the bucket:
//    token rows per DP group), both captured when the group started, or an
//    eager forward, with the reason; the batch variant (graphs run as
//    captured: ordinary).
//  - handoff: the form (stream state, row form) of the handoff a non-first
//    piece takes, checked against every rank's rows before any collective.
//  - output: a handoff, logits (each sequence's last token or all of them),
//    or tokens chosen where the logits are (the sampling needs).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "seam/boundary/forward_batch.h"
#include "seam/boundary/pipeline_handoff.h"
#include "seam/boundary/variant_choice.h"
#include "seam/models/decoder_model.h"
#include "seam/models/kv_cache.h"

namespace seam::runtime {

// How a plan runs on the ranks: eagerly, or replaying a decode graph (one
// row per sequence) or a mixed graph (prefill chunks beside decode rows).
enum class StepExecution { kEager, kGraph, kMixedGraph };
const char* StepExecutionName(StepExecution execution);

// What a sequence's rows in one step are.
enum class RowKind {
  kPrefill,  // more than one token: a prompt, or a chunk of one
  kDecode,   // one token after those in the cache
};

// What the step returns (PieceOutput).
enum class StepOutput {
  kHandoff,    // a non-last piece: one handoff per TP rank
  kLogits,     // the last piece: each sequence's last token's logits
  kAllLogits,  // the last piece: every token's logits
  kTokens,     // the last piece: one token per sequence, chosen where the logits are
};
const char* StepOutputName(StepOutput output);

// The form a handoff travels in: its stream state and the rows it holds.
struct HandoffForm {
  boundary::StreamState state = boundary::StreamState::kPending;
  boundary::RowForm rows = boundary::RowForm::kAttnTpSlice;
  bool operator==(const HandoffForm& o) const { return state == o.state && rows == o.rows; }
  bool operator!=(const HandoffForm& o) const { return !(*this == o); }
  std::string ToString() const;
};

struct SequencePlan {
  uint64_t sequence = 0;
  int dp_group = 0;
  bool placed_now = false;  // its first step here: it lives on dp_group once the step has run
  int64_t start = 0;        // position of its first token in this step
  int64_t tokens = 0;
  RowKind kind = RowKind::kDecode;
  int64_t row = 0;        // its first row among its DP group's rows
  int64_t logit_row = 0;  // its first logits row in its DP group's output (last piece)
};

struct DpGroupPlan {
  models::StepInput input;     // its sequences, in the step's input order
  std::vector<size_t> members;  // their indices in the step (StepPlan::sequences)
  int64_t rows = 0;             // token rows
  int64_t logit_rows = 0;       // logits rows (last piece)
  int64_t blocks_needed = 0;    // KV blocks its cache takes for the step
  int64_t states_needed = 0;    // Mamba state slots its cache takes (new sequences)
};

struct StepPlan {
  std::vector<SequencePlan> sequences;  // in the step's input order
  std::vector<DpGroupPlan> dp_groups;   // index = attention-DP group
  std::vector<int64_t> dp_rows;         // rows per DP group (the batch's)
  boundary::BatchVariant variant = boundary::BatchVariant::kOrdinary;
  StepExecution execution = StepExecution::kEager;
  int64_t bucket = 0;         // kGraph: the graph's sequences per DP group; kMixedGraph: its rows
  std::string eager_reason;   // kEager: why no graph ran it
  std::optional<HandoffForm> in;  // a non-first piece: the handoff it takes
  StepOutput output = StepOutput::kLogits;
  uint64_t group_step = 0;    // the group's step count it was planned at (Run refuses a stale plan)

  // One line per part: "step: 3 sequences ..., dp 0: ..., execution: ...".
  std::string ToString() const;
};

// The facts of a stage group that do not change between steps.
struct StepPlanFacts {
  int tp = 1;
  int attn_dp = 1;
  int attn_cp = 1;
  bool first_piece = true;
  bool last_piece = true;
  int64_t hidden_size = 0;  // the handoff's width
  int64_t max_step_tokens = 0;  // token rows of one step over all DP groups; 0: unbounded
  boundary::VariantChoiceOptions variants;
  // Decode graphs: the buckets captured (ascending; empty: none), the
  // longest context they serve, the handoff form a non-first piece's graphs
  // take, and why graphs are off ("" when on).
  std::vector<int64_t> graph_buckets;
  int64_t graph_max_context = 0;
  std::optional<HandoffForm> graph_in_form;
  std::string graph_off_reason;
  // Mixed graphs (the same context limit and handoff form): the token rows
  // per DP group of each (ascending; empty: none) and the sequences it
  // takes (same index; fewer than its rows).
  std::vector<int64_t> mixed_graph_rows;
  std::vector<int64_t> mixed_graph_sequences;
};

// The group's state a plan reads: where its sequences live and each DP
// group's cache (the one of its attention-TP rank 0; every rank of a DP
// group holds alike).
struct StepPlanState {
  const std::map<uint64_t, int>* dp_of = nullptr;
  std::vector<const models::KvCache*> caches;  // index = DP group
  uint64_t group_step = 0;
  // Refuse a step the caches cannot take now. Off: the plan says only how a
  // step would run (StageGroup::CanStepFed; the fed step itself checks).
  bool bounded_by_caches = true;
};

// One step as the runner is asked for it.
struct StepRequest {
  const std::vector<models::SequenceStep>* sequences = nullptr;
  bool all_logits = false;
  // The last piece chooses the tokens (one choice per sequence, without all_logits).
  bool choose_tokens = false;
  size_t choices = 0;  // how many token choices came with the step
  // A non-first piece: the handoff of each TP rank (empty on the first piece).
  const std::vector<boundary::PipelineTensors>* in = nullptr;
};

// Plans `request` on a group with `facts` in `state`. INVALID_ARGUMENT for
// a malformed step (a sequence twice or without tokens, more token rows
// than max_step_tokens, a DP group out of range, none named where there are
// several, another than the one the sequence lives on, token choices that
// do not fit, handoffs of the wrong count or rows); RESOURCE_EXHAUSTED when a DP group's cache cannot take
// the blocks or state slots its sequences need (bounded_by_caches). Reads
// nothing but its arguments and changes nothing.
absl::StatusOr<StepPlan> PlanStep(const StepRequest& request, const StepPlanFacts& facts, const StepPlanState& state);

}  // namespace seam::runtime
