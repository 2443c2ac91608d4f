// Text and JSON renderings of stage plans. Both print the same facts, all of
// them independent of the rank, so equal plans give equal bytes.
#include "seam/boundary/plan_printer.h"

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace seam::boundary {
namespace {

const char* YesNo(bool b) { return b ? "yes" : "no"; }

std::string ProducerText(const StagePlace& place) {
  return place.has_producer ? StageKindName(place.producer_kind) : "none";
}

std::vector<std::string> StepStrings(const std::vector<Step>& steps) {
  std::vector<std::string> out;
  for (const Step& s : steps) out.push_back(s.ToString());
  return out;
}

std::vector<std::string> CollectiveStrings(const std::vector<Step>& steps) {
  std::vector<std::string> out;
  for (const Step& s : steps) {
    if (s.issues_collective()) out.push_back(s.ToString());
  }
  return out;
}

std::string JoinOrNone(const std::vector<std::string>& parts) {
  return parts.empty() ? "none" : absl::StrJoin(parts, ", ");
}

std::string Header(const std::vector<const StagePlan*>& stages) {
  if (stages.empty()) return "plan: 0 stages\n";
  const StagePlan& first = *stages.front();
  const Topology& t = first.topology;
  return absl::StrCat("plan: ", stages.size(), " stages, tp=", t.tp, " attn_dp=", t.attn_dp,
                      " attn_tp=", t.attn_tp(), ", policy ", ReductionPolicyName(first.policy), "\n");
}

bool TakesHandoff(const ExitPath& exit) {
  for (const ExitOption& o : exit.options) {
    if (o.choice == ExitChoice::kDeferFinalize) return true;
  }
  return false;
}

// What a capture at this entry hands (attention stages only).
std::string CaptureText(const EntryPath& e) {
  const bool moves = e.residual_after != e.compute_rows;
  const bool initial = e.incoming.state == StreamState::kInitial;
  return absl::StrCat("capture: ", initial ? "the input before init_residual" : "the updated residual", " on ",
                      RowFormName(e.residual_after),
                      e.incoming.state == StreamState::kPending ? " (borrowed, sum completed unfused)" : " (borrowed)",
                      "; gathered on ",
                      RowFormName(e.compute_rows), moves ? " (owned: the move allocates)" : " (borrowed)");
}

std::string UpdateReadText(const StageDeclaration& d) {
  const ReadoutCaps& r = d.readout_caps;
  return absl::StrCat("update=", d.update->name(), d.update->caps().applied_at_exit ? " (applied at exit)" : "",
                      " read: add_norm=", YesNo(r.add_norm),
                      " reads_after_attn_tp_gather=", YesNo(r.reads_after_attn_tp_gather),
                      " reads_before_dp_gather=", YesNo(r.reads_before_dp_gather),
                      " gathering_reads=", YesNo(r.gathering_reads),
                      " completing_fusions=", YesNo(r.completing_fusions));
}

void AppendEntryText(std::string* out, const char* label, const EntryPath& e, bool capture = false) {
  absl::StrAppend(out, "    ", label, " ", e.incoming.ToString(), "\n");
  absl::StrAppend(out, "      steps: ", JoinOrNone(StepStrings(e.steps)), "\n");
  absl::StrAppend(out, "      residual after: ", RowFormName(e.residual_after),
                  ", compute on: ", RowFormName(e.compute_rows), "\n");
  absl::StrAppend(out, "      collectives: ", JoinOrNone(CollectiveStrings(e.steps)), "\n");
  if (capture) absl::StrAppend(out, "      ", CaptureText(e), "\n");
}

void AppendExitText(std::string* out, const ExitPath& exit) {
  const ExitFacts& f = exit.facts;
  absl::StrAppend(out, "    exit facts: terminal=", YesNo(f.terminal),
                  " may_leave_to_next_input=", YesNo(f.may_leave_to_next_input),
                  " fixed_rs_eligible=", YesNo(f.fixed_rs_eligible), " rsv_eligible=", YesNo(f.rsv_eligible),
                  " rsv_first=", YesNo(f.rsv_first),
                  f.leave_needs_provider ? " leave_needs_provider=yes" : "", "\n");
  for (size_t i = 0; i < exit.options.size(); ++i) {
    const ExitOption& o = exit.options[i];
    absl::StrAppend(out, "    exit option ", i, ": ", ExitChoiceName(o.choice), " (residual on ",
                    RowFormName(o.residual), ")\n");
    absl::StrAppend(out, "      steps: ", JoinOrNone(StepStrings(o.steps)), "\n");
    absl::StrAppend(out, "      leaves: ", o.leaves.ToString(), "\n");
    absl::StrAppend(out, "      collectives: ", JoinOrNone(CollectiveStrings(o.steps)), "\n");
  }
}

void AppendStageText(std::string* out, const StagePlan& plan) {
  const StageDeclaration& d = plan.declaration;
  const StagePlace& p = d.place;
  absl::StrAppend(out, "stage ", p.index, ": layer ", p.global_layer, ", ", d.ToString(), ", owes ",
                  SumGroupName(d.owed_sum()), "\n");
  absl::StrAppend(out, "  place: terminal=", YesNo(p.terminal), " producer=", ProducerText(p),
                  " consumer_is_mixer=", YesNo(p.consumer_is_mixer), "\n");
  if (p.branch) {
    absl::StrAppend(out, "  branch: ", p.prepared_entry ? "first stage, entered through branch_input (its norm never applied)"
                                                         : "inside a prepared branch",
                    "; ordinary rows, all-reduce completions\n");
  }
  absl::StrAppend(out, "  ", UpdateReadText(d), "\n");
  const bool capture = d.kind == StageKind::kAttention;
  for (const VariantPaths& v : plan.variants) {
    absl::StrAppend(out, "  variant ", BatchVariantName(v.variant), "\n");
    for (const EntryPath& e : v.entries) AppendEntryText(out, "entry", e, capture && !p.prepared_entry);
    AppendExitText(out, v.exit);
    if (!v.final_read.empty()) {
      absl::StrAppend(out, "    final norm: ", TakesHandoff(v.exit)
                                                   ? "takes a deferred MoE finalize (fused finalize_norm service, or "
                                                     "completed unfused first; capture refused with the service)"
                                                   : "completes what the last stage owes",
                      "; capture hands the updated residual, borrowed\n");
    }
    for (const EntryPath& e : v.final_read) AppendEntryText(out, "final read", e);
  }
}

nlohmann::json IncomingJson(const IncomingForm& f) {
  nlohmann::json j = {{"state", StreamStateName(f.state)}, {"text", f.ToString()}};
  switch (f.state) {
    case StreamState::kInitial: j["rows"] = RowFormName(f.rows); break;
    case StreamState::kWritten: j["residual"] = RowFormName(f.residual); break;
    case StreamState::kPending:
      j["rows"] = RowFormName(f.rows);
      j["owed"] = SumGroupName(f.owed);
      j["residual"] = RowFormName(f.residual);
      break;
  }
  return j;
}

nlohmann::json EntryJson(const EntryPath& e, bool capture = false) {
  nlohmann::json j = {{"incoming", IncomingJson(e.incoming)},
                      {"steps", StepStrings(e.steps)},
                      {"residual_after", RowFormName(e.residual_after)},
                      {"compute_rows", RowFormName(e.compute_rows)},
                      {"collectives", CollectiveStrings(e.steps)}};
  if (capture) j["capture"] = CaptureText(e);
  return j;
}

nlohmann::json ExitJson(const ExitPath& exit) {
  const ExitFacts& f = exit.facts;
  nlohmann::json options = nlohmann::json::array();
  for (const ExitOption& o : exit.options) {
    options.push_back({{"choice", ExitChoiceName(o.choice)},
                       {"residual", RowFormName(o.residual)},
                       {"steps", StepStrings(o.steps)},
                       {"leaves", IncomingJson(o.leaves)},
                       {"collectives", CollectiveStrings(o.steps)}});
  }
  return {{"facts",
           {{"terminal", f.terminal},
            {"may_leave_to_next_input", f.may_leave_to_next_input},
            {"fixed_rs_eligible", f.fixed_rs_eligible},
            {"rsv_eligible", f.rsv_eligible},
            {"rsv_first", f.rsv_first},
            {"leave_needs_provider", f.leave_needs_provider}}},
          {"options", options}};
}

nlohmann::json StageJson(const StagePlan& plan) {
  const StageDeclaration& d = plan.declaration;
  const StagePlace& p = d.place;
  nlohmann::json variants = nlohmann::json::array();
  for (const VariantPaths& v : plan.variants) {
    nlohmann::json entries = nlohmann::json::array(), final_read = nlohmann::json::array();
    const bool capture = d.kind == StageKind::kAttention && !p.prepared_entry;
    for (const EntryPath& e : v.entries) entries.push_back(EntryJson(e, capture));
    for (const EntryPath& e : v.final_read) final_read.push_back(EntryJson(e));
    variants.push_back({{"variant", BatchVariantName(v.variant)},
                        {"entries", entries},
                        {"exit", ExitJson(v.exit)},
                        {"final_read", final_read},
                        {"final_norm_takes_finalize_handoff", !v.final_read.empty() && TakesHandoff(v.exit)}});
  }
  return {{"index", p.index},
          {"global_layer", p.global_layer},
          {"declaration", d.ToString()},
          {"owes", SumGroupName(d.owed_sum())},
          {"place",
           {{"terminal", p.terminal},
            {"producer", ProducerText(p)},
            {"consumer_is_mixer", p.consumer_is_mixer},
            {"branch", p.branch},
            {"prepared_entry", p.prepared_entry}}},
          {"update_read", UpdateReadText(d)},
          {"variants", variants}};
}

}  // namespace

std::string PlanToText(const std::vector<const StagePlan*>& stages) {
  std::string out = Header(stages);
  for (const StagePlan* plan : stages) AppendStageText(&out, *plan);
  return out;
}

std::string PlanToJson(const std::vector<const StagePlan*>& stages) {
  nlohmann::json doc;
  if (!stages.empty()) {
    const Topology& t = stages.front()->topology;
    doc["topology"] = {{"tp", t.tp}, {"attn_dp", t.attn_dp}, {"attn_tp", t.attn_tp()}};
    doc["policy"] = ReductionPolicyName(stages.front()->policy);
  }
  doc["stages"] = nlohmann::json::array();
  for (const StagePlan* plan : stages) doc["stages"].push_back(StageJson(*plan));
  return doc.dump(2) + "\n";
}

}  // namespace seam::boundary
