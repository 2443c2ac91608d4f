// Framing and checking of the stage-to-stage handoff (see stage_handoff.h).
#include "stage_handoff.h"

#include "absl/strings/str_cat.h"

namespace seam::server {
namespace {

std::string TensorName(int rank, const char* part) { return absl::StrCat("r", rank, ".", part); }

}  // namespace

uint64_t TokenCount(const v1::MicrobatchDescriptor& d) {
  uint64_t n = 0;
  for (const v1::SequenceEntry& s : d.sequences()) n += static_cast<uint64_t>(s.token_ids_size());
  return n;
}

absl::StatusOr<OutgoingHandoff> FrameHandoff(const v1::MicrobatchDescriptor& d, const v1::StageConfig& config,
                                             const StageCompute& compute,
                                             const std::vector<boundary::PipelineTensors>& ranks) {
  const int tp = compute.tp(), attn_tp = tp / compute.attn_dp();
  if (static_cast<int>(ranks.size()) != tp) {
    return absl::InvalidArgumentError(absl::StrCat("handoff: ", ranks.size(), " ranks' tensors for TP ", tp));
  }
  const bool pending = ranks[0].state == boundary::StreamState::kPending;
  OutgoingHandoff out;
  for (int r = 0; r < tp; ++r) {
    const boundary::PipelineTensors& t = ranks[r];
    if ((t.state == boundary::StreamState::kPending) != pending || t.rows != boundary::RowForm::kDpRows) {
      return absl::InvalidArgumentError(
          absl::StrCat("handoff: rank ", r, " exports state ", boundary::StreamStateName(t.state), " on ",
                       boundary::RowFormName(t.rows), ", rank 0 state ", boundary::StreamStateName(ranks[0].state),
                       " (every rank must agree, on DP rows)"));
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
  p->set_last_stage_kind(compute.last_stage_kind());
  p->set_exit_policy(compute.exit_policy());
  h.set_token_count(TokenCount(d));
  for (int g = 0; g < compute.attn_dp(); ++g) {
    h.add_attn_dp_row_counts(static_cast<uint64_t>(ranks[g * attn_tp].hidden.dim(0)));
  }
  return out;
}

absl::Status CheckHandoffHeader(const v1::StreamState& h, const v1::MicrobatchDescriptor& d,
                                const v1::StageConfig& config, const StageCompute& compute) {
  const int64_t hidden_size = compute.model_config().hidden_size;
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
  if (p.last_stage_kind() != compute.last_stage_kind()) {
    return bad("producer.last_stage_kind: ", v1::StageKind_Name(p.last_stage_kind()), ", expected ",
               v1::StageKind_Name(compute.last_stage_kind()));
  }
  if (p.exit_policy() != compute.exit_policy()) {
    return bad("producer.exit_policy: '", p.exit_policy(), "', expected '", compute.exit_policy(), "'");
  }
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
  const int per_rank = pending ? 2 : 1;
  if (h.tensors_size() != tp * per_rank) return bad("tensors: ", h.tensors_size(), ", expected ", tp * per_rank);
  for (int i = 0; i < h.tensors_size(); ++i) {
    const int r = i / per_rank;
    const std::string want = TensorName(r, i % per_rank == 0 ? "hidden" : "residual");
    const v1::TensorDesc& t = h.tensors(i);
    if (t.name() != want) return bad("tensors[", i, "].name: '", t.name(), "', expected '", want, "'");
    const uint64_t dp_rows = h.attn_dp_row_counts(r / (tp / dp));
    if (t.shape_size() != 2 || static_cast<uint64_t>(t.shape(0)) != dp_rows || t.shape(1) != hidden_size) {
      return bad("tensors[", i, "].shape of '", want, "': expected [", dp_rows, ", ", hidden_size, "]");
    }
  }
  return absl::OkStatus();
}

std::vector<boundary::PipelineTensors> UnframeHandoff(const v1::StreamState& header, std::vector<Tensor> tensors,
                                                      int tp) {
  const bool pending = header.state() == v1::StreamState::STATE_PENDING;
  const int per_rank = pending ? 2 : 1;
  std::vector<boundary::PipelineTensors> ranks(tp);
  for (int r = 0; r < tp; ++r) {
    ranks[r].state = pending ? boundary::StreamState::kPending : boundary::StreamState::kWritten;
    ranks[r].rows = boundary::RowForm::kDpRows;
    ranks[r].hidden = std::move(tensors[r * per_rank]);
    if (pending) ranks[r].residual = std::move(tensors[r * per_rank + 1]);
  }
  return ranks;
}

}  // namespace seam::server
