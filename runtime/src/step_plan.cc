// PlanStep (step_plan.h): placement, rows, cache needs, the handoff check,
// execution and output of one step, in the order a step is refused in.
#include "seam/runtime/step_plan.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "seam/core/status.h"

namespace seam::runtime {
namespace {

absl::Status CheckOutput(const StepRequest& r, const StepPlanFacts& f) {
  const size_t n = r.sequences->size();
  if (r.choose_tokens && (!f.last_piece || r.all_logits || r.choices != n)) {
    return absl::InvalidArgumentError(absl::StrCat("token choices are for the last piece without all_logits, one "
                                                   "per sequence: ", r.choices, " for ", n, " sequences",
                                                   f.last_piece ? "" : " on a piece that is not the last"));
  }
  const size_t handoffs = r.in == nullptr ? 0 : r.in->size();
  if (handoffs != (f.first_piece ? 0u : static_cast<size_t>(f.tp))) {
    return absl::InvalidArgumentError(absl::StrCat("this piece takes ", f.first_piece ? 0 : f.tp, " handoffs, got ",
                                                   handoffs));
  }
  return absl::OkStatus();
}

// The DP group a sequence runs on: the one the step names, which must be the
// one it lives on; with one DP group a step may leave it unnamed.
absl::StatusOr<int> DpGroupFor(const models::SequenceStep& s, const StepPlanFacts& f, const StepPlanState& state,
                               bool* placed_now) {
  if (s.dp_group >= f.attn_dp) {
    return absl::InvalidArgumentError(absl::StrCat("sequence ", s.sequence, ": DP group ", s.dp_group,
                                                   " of a group with attention DP ", f.attn_dp));
  }
  if (s.dp_group < 0 && f.attn_dp > 1) {
    return absl::InvalidArgumentError(absl::StrCat("sequence ", s.sequence, " names no DP group; this stage has ",
                                                   f.attn_dp, " attention-DP groups and places a sequence only where "
                                                   "the step names"));
  }
  const int named = s.dp_group < 0 ? 0 : s.dp_group;
  const auto lives = state.dp_of->find(s.sequence);
  if (lives != state.dp_of->end() && lives->second != named) {
    return absl::InvalidArgumentError(absl::StrCat("sequence ", s.sequence, " lives on DP group ", lives->second,
                                                   "; the step names DP group ", named));
  }
  *placed_now = lives == state.dp_of->end();
  return named;
}

// Placement and rows of every sequence.
absl::Status PlaceSequences(const StepRequest& r, const StepPlanFacts& f, const StepPlanState& state,
                            StepPlan& plan) {
  std::set<uint64_t> seen;
  plan.dp_groups.resize(f.attn_dp);
  for (const models::SequenceStep& s : *r.sequences) {
    if (!seen.insert(s.sequence).second) {
      return absl::InvalidArgumentError(absl::StrCat("sequence ", s.sequence, " appears twice in one step"));
    }
    if (s.tokens.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("sequence ", s.sequence, " has no tokens in this step"));
    }
    SequencePlan p;
    p.sequence = s.sequence;
    SEAM_ASSIGN_OR_RETURN(p.dp_group, DpGroupFor(s, f, state, &p.placed_now));
    p.start = s.start;
    p.tokens = static_cast<int64_t>(s.tokens.size());
    p.kind = p.tokens > 1 ? RowKind::kPrefill : RowKind::kDecode;
    DpGroupPlan& g = plan.dp_groups[p.dp_group];
    p.row = g.rows;
    p.logit_row = g.logit_rows;
    g.rows += p.tokens;
    g.logit_rows += r.all_logits ? p.tokens : 1;
    g.members.push_back(plan.sequences.size());
    g.input.sequences.push_back(s);
    g.input.all_logits = r.all_logits;
    plan.sequences.push_back(p);
  }
  int64_t rows = 0;
  for (const DpGroupPlan& g : plan.dp_groups) {
    plan.dp_rows.push_back(g.rows);
    rows += g.rows;
  }
  if (f.max_step_tokens > 0 && rows > f.max_step_tokens) {
    return absl::InvalidArgumentError(absl::StrCat("the step carries ", rows, " token rows, more than this stage's ",
                                                   f.max_step_tokens, " (its max step tokens)"));
  }
  return absl::OkStatus();
}

// What each DP group's cache must take; refused before any rank runs.
absl::Status PlanCache(const StepPlanState& state, StepPlan& plan) {
  for (size_t dp = 0; dp < plan.dp_groups.size(); ++dp) {
    DpGroupPlan& g = plan.dp_groups[dp];
    std::vector<models::CacheSpan> spans;
    for (const models::SequenceStep& s : g.input.sequences) {
      spans.push_back(models::CacheSpan{s.sequence, s.start, static_cast<int64_t>(s.tokens.size())});
    }
    const models::KvCache& cache = *state.caches.at(dp);
    g.blocks_needed = cache.BlocksNeeded(spans);
    g.states_needed = cache.StatesNeeded(spans);
    if (!state.bounded_by_caches) continue;
    if (g.blocks_needed > cache.free_blocks()) {
      return absl::ResourceExhaustedError(absl::StrCat("KV cache full on DP group ", dp, ": the step needs ",
                                                       g.blocks_needed, " more blocks, ", cache.free_blocks(), " of ",
                                                       cache.num_blocks(), " are free"));
    }
    if (g.states_needed > 0 && g.states_needed > cache.states()->free_slots()) {
      return absl::ResourceExhaustedError(absl::StrCat("Mamba state full on DP group ", dp, ": the step needs ",
                                                       g.states_needed, " more sequence slots, ",
                                                       cache.states()->free_slots(), " are free"));
    }
  }
  return absl::OkStatus();
}

// Every rank's handoff fits its rows, and all of them travel in one form.
absl::Status PlanHandoff(const StepRequest& r, const StepPlanFacts& f, StepPlan& plan) {
  if (r.in == nullptr || r.in->empty()) return absl::OkStatus();
  for (size_t rank = 0; rank < r.in->size(); ++rank) {
    SEAM_ASSIGN_OR_RETURN(const boundary::Topology topology,
                          boundary::Topology::Make(f.tp, f.attn_dp, static_cast<int>(rank), f.attn_cp));
    const boundary::BatchRows rows(topology, plan.dp_rows, /*padded=*/true);
    SEAM_RETURN_IF_ERROR(Annotate(boundary::CheckPipelineTensors((*r.in)[rank], rows, f.hidden_size),
                                  absl::StrCat("rank ", rank, " (dp ", topology.dp_rank(), ", attn_tp ",
                                               topology.attn_tp_rank(), ")")));
  }
  const boundary::PipelineTensors& first = r.in->front();
  plan.in = HandoffForm{first.state, first.rows};
  return absl::OkStatus();
}

// The smallest mixed graph every DP group of a step holding prefill rows
// fits ("" when one does), or why none does.
std::string MixedBlocker(const StepPlanFacts& f, const StepRequest& r, const StepPlan& plan, int64_t* bucket) {
  if (r.all_logits) return "a prefill returning every token's logits";
  for (size_t i = 0; i < f.mixed_graph_rows.size(); ++i) {
    const int64_t rows = f.mixed_graph_rows[i], seqs = f.mixed_graph_sequences[i];
    bool fits = true;
    for (const DpGroupPlan& g : plan.dp_groups) {
      const int64_t n = static_cast<int64_t>(g.members.size());
      // The padding rows go to a padding sequence.
      fits = fits && g.rows <= rows && n <= seqs && (g.rows == rows || n < seqs);
    }
    if (fits) {
      *bucket = rows;
      return "";
    }
  }
  return absl::StrCat("a prefill past the mixed graphs (the largest: ", f.mixed_graph_rows.back(), " rows of ",
                      f.mixed_graph_sequences.back(), " sequences per DP group)");
}

// Why the step cannot replay a graph ("" when it can), which kind and the bucket.
std::string GraphBlocker(const StepPlanFacts& f, const StepRequest& r, const StepPlan& plan, StepExecution* kind,
                         int64_t* bucket) {
  if (!f.graph_off_reason.empty()) return absl::StrCat("graphs off: ", f.graph_off_reason);
  bool prefill = false;
  for (const SequencePlan& s : plan.sequences) prefill = prefill || s.kind != RowKind::kDecode;
  if (prefill && f.mixed_graph_rows.empty()) return "a prefill";
  for (const SequencePlan& s : plan.sequences) {
    if (s.start + s.tokens > f.graph_max_context) {
      return absl::StrCat("a context past the graphs' ", f.graph_max_context, " tokens");
    }
  }
  if (r.in != nullptr) {
    for (const boundary::PipelineTensors& t : *r.in) {
      if (t.state != plan.in->state || t.rows != plan.in->rows) return "the ranks' handoffs differ in form";
    }
    if (plan.in.has_value() && f.graph_in_form.has_value() && *plan.in != *f.graph_in_form) {
      return absl::StrCat("a handoff in ", plan.in->ToString(), "; the graphs take ", f.graph_in_form->ToString());
    }
  }
  const int64_t most = *std::max_element(plan.dp_rows.begin(), plan.dp_rows.end());
  if (most == 0) return "no rows";
  if (prefill) {
    *kind = StepExecution::kMixedGraph;
    return MixedBlocker(f, r, plan, bucket);
  }
  *kind = StepExecution::kGraph;
  for (int64_t b : f.graph_buckets) {
    if (b >= most) {
      *bucket = b;
      return "";
    }
  }
  return absl::StrCat(most, " sequences in a DP group, past the largest bucket ",
                      f.graph_buckets.empty() ? 0 : f.graph_buckets.back());
}

void PlanExecution(const StepRequest& r, const StepPlanFacts& f, StepPlan& plan) {
  int64_t bucket = 0;
  StepExecution kind = StepExecution::kGraph;
  plan.eager_reason = GraphBlocker(f, r, plan, &kind, &bucket);
  if (plan.eager_reason.empty()) {
    plan.execution = kind;
    plan.bucket = bucket;
    plan.variant = boundary::BatchVariant::kOrdinary;  // graphs replay as they were captured
    return;
  }
  bool prefill = false;
  for (const SequencePlan& s : plan.sequences) prefill = prefill || s.kind == RowKind::kPrefill;
  // The topology's facts the choice reads (TP, attention TP, CP) are alike on every rank.
  const absl::StatusOr<boundary::Topology> rank0 = boundary::Topology::Make(f.tp, f.attn_dp, 0, f.attn_cp);
  plan.variant = boundary::ChooseBatchVariant(f.variants, *rank0, plan.dp_rows, prefill);
}

}  // namespace

absl::StatusOr<StepPlan> PlanStep(const StepRequest& request, const StepPlanFacts& facts,
                                  const StepPlanState& state) {
  SEAM_CHECK(request.sequences != nullptr && state.dp_of != nullptr);
  SEAM_CHECK(static_cast<int>(state.caches.size()) == facts.attn_dp);
  SEAM_RETURN_IF_ERROR(boundary::Topology::Make(facts.tp, facts.attn_dp, 0, facts.attn_cp).status());
  SEAM_RETURN_IF_ERROR(CheckOutput(request, facts));
  StepPlan plan;
  plan.group_step = state.group_step;
  SEAM_RETURN_IF_ERROR(PlaceSequences(request, facts, state, plan));
  SEAM_RETURN_IF_ERROR(PlanCache(state, plan));
  SEAM_RETURN_IF_ERROR(PlanHandoff(request, facts, plan));
  PlanExecution(request, facts, plan);
  plan.output = !facts.last_piece        ? StepOutput::kHandoff
                : request.choose_tokens ? StepOutput::kTokens
                : request.all_logits    ? StepOutput::kAllLogits
                                        : StepOutput::kLogits;
  return plan;
}

const char* StepExecutionName(StepExecution execution) {
  switch (execution) {
    case StepExecution::kGraph:
      return "graph";
    case StepExecution::kMixedGraph:
      return "mixed_graph";
    case StepExecution::kEager:
      return "eager";
  }
  return "?";
}

const char* StepOutputName(StepOutput output) {
  switch (output) {
    case StepOutput::kHandoff:
      return "handoff";
    case StepOutput::kLogits:
      return "logits";
    case StepOutput::kAllLogits:
      return "all_logits";
    case StepOutput::kTokens:
      return "tokens";
  }
  return "?";
}

std::string HandoffForm::ToString() const {
  return absl::StrCat(boundary::StreamStateName(state), "/", boundary::RowFormName(rows));
}

std::string StepPlan::ToString() const {
  std::vector<std::string> groups;
  for (size_t dp = 0; dp < dp_groups.size(); ++dp) {
    const DpGroupPlan& g = dp_groups[dp];
    std::vector<std::string> members;
    for (size_t i : g.members) {
      const SequencePlan& s = sequences[i];
      members.push_back(absl::StrCat(s.sequence, s.placed_now ? "*" : "", "@", s.start, "+", s.tokens));
    }
    groups.push_back(absl::StrCat("dp ", dp, ": ", g.rows, " rows [", absl::StrJoin(members, " "), "], ",
                                  g.blocks_needed, " blocks, ", g.states_needed, " state slots"));
  }
  const std::string execution = this->execution == StepExecution::kGraph ? absl::StrCat("graph bucket ", bucket)
                                : this->execution == StepExecution::kMixedGraph
                                    ? absl::StrCat("mixed graph of ", bucket, " rows")
                                    : absl::StrCat("eager (", eager_reason, ")");
  return absl::StrCat(sequences.size(), " sequences; ", absl::StrJoin(groups, "; "), "; ", execution, ", ",
                      boundary::BatchVariantName(variant), "; in ", in.has_value() ? in->ToString() : "none",
                      "; out ", StepOutputName(output));
}

}  // namespace seam::runtime
