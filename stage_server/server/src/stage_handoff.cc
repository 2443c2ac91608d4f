// Framing and checking of the stage-to-stage handoff (see stage_handoff.h).
#include "stage_handoff.h"

#include <optional>

#include "absl/strings/str_cat.h"
#include "seam/boundary/reduction_policy.h"

namespace seam::server {
namespace {

std::string TensorName(int rank, const char* part) { return absl::StrCat("r", rank, ".", part); }

// Every Qwen3 / Qwen3-MoE decoder layer ends with its FFN (dense or MoE).
constexpr v1::StageKind kLastStageKind = v1::STAGE_KIND_FFN;

v1::RowForm ToWire(boundary::RowForm form) {
  switch (form) {
    case boundary::RowForm::kDpRows:
      return v1::ROW_FORM_DP_ROWS;
    case boundary::RowForm::kAttnTpSlice:
      return v1::ROW_FORM_ATTN_TP_SLICE;
    case boundary::RowForm::kFfnRows:
      return v1::ROW_FORM_FFN_ROWS;
    case boundary::RowForm::kCpRows:  // never crosses a pipeline cut (ToPp sends DP-row slices)
      break;
  }
  return v1::ROW_FORM_UNSPECIFIED;
}

std::optional<boundary::RowForm> FromWire(v1::RowForm form) {
  switch (form) {
    case v1::ROW_FORM_DP_ROWS:
      return boundary::RowForm::kDpRows;
    case v1::ROW_FORM_ATTN_TP_SLICE:
      return boundary::RowForm::kAttnTpSlice;
    case v1::ROW_FORM_FFN_ROWS:
      return boundary::RowForm::kFfnRows;
    default:
      return std::nullopt;
  }
}

}  // namespace

uint64_t TokenCount(const v1::MicrobatchDescriptor& d) {
  uint64_t n = 0;
  for (const v1::SequenceEntry& s : d.sequences()) n += static_cast<uint64_t>(s.token_ids_size());
  return n;
}

absl::StatusOr<OutgoingHandoff> FrameHandoff(const v1::MicrobatchDescriptor& d, const v1::StageConfig& config,
                                             const runtime::StageGroup& group,
                                             const std::vector<boundary::PipelineTensors>& ranks) {
  // Each DP group's rows are the slices of its CP rank 0's attention-TP
  // ranks (the other CP ranks send the same slices).
  const int tp = group.tp(), attn_tp = tp / group.attn_dp(), slices = attn_tp / group.attn_cp();
  if (static_cast<int>(ranks.size()) != tp) {
    return absl::InvalidArgumentError(absl::StrCat("handoff: ", ranks.size(), " ranks' tensors for TP ", tp));
  }
  const bool pending = ranks[0].state == boundary::StreamState::kPending;
  OutgoingHandoff out;
  for (int r = 0; r < tp; ++r) {
    const boundary::PipelineTensors& t = ranks[r];
    if ((t.state == boundary::StreamState::kPending) != pending || t.rows != ranks[0].rows) {
      return absl::InvalidArgumentError(absl::StrCat(
          "handoff: rank ", r, " exports state ", boundary::StreamStateName(t.state), " on ",
          boundary::RowFormName(t.rows), ", rank 0 state ", boundary::StreamStateName(ranks[0].state), " on ",
          boundary::RowFormName(ranks[0].rows), " (every rank must agree)"));
    }
    out.tensors.emplace_back(TensorName(r, "hidden"), t.hidden);
    if (pending) out.tensors.emplace_back(TensorName(r, "residual"), t.residual);
  }
  v1::StreamState& h = out.header;
  h.set_microbatch_id(d.microbatch_id());
  h.set_sequence_number(d.sequence_number());
  h.set_epoch(d.epoch());
  h.set_state(pending ? v1::StreamState::STATE_PENDING : v1::StreamState::STATE_WRITTEN);
  h.mutable_owed()->set_sum_group(v1::SUM_GROUP_NONE);
  h.mutable_owed()->set_row_movement(v1::ROW_MOVEMENT_NONE);
  h.mutable_owed()->set_residual_update_owed(pending);
  v1::ProducerFacts* p = h.mutable_producer();
  p->set_stage_index(config.pipeline_rank());
  p->set_first_layer(config.first_layer());
  p->set_last_layer(config.last_layer());
  p->set_tp_size(config.tp_size());
  p->set_attn_dp_size(config.attn_dp_size());
  p->set_last_stage_kind(kLastStageKind);
  p->set_exit_policy(boundary::ReductionPolicyName(group.policy()));
  p->set_row_form(ToWire(ranks[0].rows));
  h.set_token_count(TokenCount(d));
  const bool dp_rows = ranks[0].rows == boundary::RowForm::kDpRows;
  for (int g = 0; g < group.attn_dp(); ++g) {
    uint64_t count = 0;
    for (int r = g * attn_tp; r < g * attn_tp + slices && (r == g * attn_tp || !dp_rows); ++r) {
      count += static_cast<uint64_t>(ranks[r].hidden.dim(0));
    }
    h.add_attn_dp_row_counts(count);
  }
  return out;
}

absl::Status CheckHandoffHeader(const v1::StreamState& h, const v1::MicrobatchDescriptor& d,
                                const v1::StageConfig& config, const runtime::StageGroup& group) {
  const int64_t hidden_size = group.config().hidden_size;
  const v1::ProducerFacts& p = h.producer();
  auto bad = [](auto&&... parts) { return absl::InvalidArgumentError(absl::StrCat(parts...)); };
  if (p.stage_index() + 1 != config.pipeline_rank()) {
    return bad("producer.stage_index: ", p.stage_index(), ", expected ", config.pipeline_rank() - 1);
  }
  if (p.last_layer() + 1 != config.first_layer()) {
    return bad("producer.last_layer: ", p.last_layer(), ", this stage starts at layer ", config.first_layer());
  }
  if (p.tp_size() != config.tp_size()) return bad("producer.tp_size: ", p.tp_size(), ", expected ", config.tp_size());
  if (p.attn_dp_size() != config.attn_dp_size()) {
    return bad("producer.attn_dp_size: ", p.attn_dp_size(), ", expected ", config.attn_dp_size());
  }
  if (p.last_stage_kind() != kLastStageKind) {
    return bad("producer.last_stage_kind: ", v1::StageKind_Name(p.last_stage_kind()), ", expected ",
               v1::StageKind_Name(kLastStageKind));
  }
  const std::string policy = boundary::ReductionPolicyName(group.policy());
  if (p.exit_policy() != policy) return bad("producer.exit_policy: '", p.exit_policy(), "', expected '", policy, "'");
  const std::optional<boundary::RowForm> form = FromWire(p.row_form());
  if (!form.has_value()) return bad("producer.row_form: ", v1::RowForm_Name(p.row_form()), " is not a row form");
  if (h.state() != v1::StreamState::STATE_WRITTEN && h.state() != v1::StreamState::STATE_PENDING) {
    return bad("state: ", v1::StreamState::State_Name(h.state()), ", expected STATE_WRITTEN or STATE_PENDING");
  }
  const bool pending = h.state() == v1::StreamState::STATE_PENDING;
  if (h.owed().sum_group() != v1::SUM_GROUP_NONE || h.owed().row_movement() != v1::ROW_MOVEMENT_NONE ||
      h.owed().residual_update_owed() != pending) {
    return bad("owed: ", h.owed().ShortDebugString(), " does not fit a completed ",
               v1::StreamState::State_Name(h.state()), " stream");
  }
  if (h.token_count() != TokenCount(d)) {
    return bad("token_count: ", h.token_count(), ", the microbatch has ", TokenCount(d), " tokens");
  }
  const int tp = static_cast<int>(config.tp_size()), dp = static_cast<int>(config.attn_dp_size());
  if (h.attn_dp_row_counts_size() != dp) {
    return bad("attn_dp_row_counts: ", h.attn_dp_row_counts_size(), " entries, expected ", dp);
  }
  uint64_t rows = 0;
  for (uint64_t n : h.attn_dp_row_counts()) rows += n;
  if (rows != h.token_count()) return bad("attn_dp_row_counts: sum ", rows, ", token_count ", h.token_count());
  const int per_rank = pending ? 2 : 1, attn_tp = tp / dp, slices = attn_tp / group.attn_cp();
  if (h.tensors_size() != tp * per_rank) return bad("tensors: ", h.tensors_size(), ", expected ", tp * per_rank);
  std::vector<uint64_t> group_rows(dp, 0);
  for (int i = 0; i < h.tensors_size(); ++i) {
    const int r = i / per_rank;
    const std::string want = TensorName(r, i % per_rank == 0 ? "hidden" : "residual");
    const v1::TensorDesc& t = h.tensors(i);
    if (t.name() != want) return bad("tensors[", i, "].name: '", t.name(), "', expected '", want, "'");
    if (t.shape_size() != 2 || t.shape(1) != hidden_size || t.shape(0) != h.tensors(r * per_rank).shape(0)) {
      return bad("tensors[", i, "].shape of '", want, "': expected [rows, ", hidden_size,
                 "] with the rows of r", r, ".hidden");
    }
    const uint64_t rows_here = static_cast<uint64_t>(t.shape(0)), group = h.attn_dp_row_counts(r / attn_tp);
    if (*form == boundary::RowForm::kDpRows && rows_here != group) {
      return bad("tensors[", i, "].shape of '", want, "': ", rows_here, " rows, its DP group holds ", group);
    }
    if (i % per_rank == 0 && r % attn_tp < slices) group_rows[r / attn_tp] += rows_here;
  }
  if (*form != boundary::RowForm::kDpRows) {
    for (int g = 0; g < dp; ++g) {
      if (group_rows[g] != h.attn_dp_row_counts(g)) {
        return bad("tensors: DP group ", g, "'s ranks hold ", group_rows[g], " rows, attn_dp_row_counts says ",
                   h.attn_dp_row_counts(g));
      }
    }
  }
  return absl::OkStatus();
}

std::vector<boundary::PipelineTensors> UnframeHandoff(const v1::StreamState& header, std::vector<Tensor> tensors,
                                                      int tp) {
  const bool pending = header.state() == v1::StreamState::STATE_PENDING;
  const int per_rank = pending ? 2 : 1;
  const boundary::RowForm form = FromWire(header.producer().row_form()).value_or(boundary::RowForm::kDpRows);
  std::vector<boundary::PipelineTensors> ranks(tp);
  for (int r = 0; r < tp; ++r) {
    ranks[r].state = pending ? boundary::StreamState::kPending : boundary::StreamState::kWritten;
    ranks[r].rows = form;
    ranks[r].hidden = std::move(tensors[r * per_rank]);
    if (pending) ranks[r].residual = std::move(tensors[r * per_rank + 1]);
  }
  return ranks;
}

}  // namespace seam::server
