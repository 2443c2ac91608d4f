// Field-by-field checks of stage configurations and microbatch descriptors.
#include "request_checks.h"

#include <set>

#include "absl/strings/str_cat.h"

namespace seam::server {

absl::Status CheckStageConfig(const v1::StageConfig& c) {
  if (c.model_dir().empty()) return absl::InvalidArgumentError("model_dir is empty");
  if (c.tp_size() < 1) return absl::InvalidArgumentError("tp_size must be at least 1, got 0");
  if (c.attn_dp_size() < 1) return absl::InvalidArgumentError("attn_dp_size must be at least 1, got 0");
  if (c.tp_size() % c.attn_dp_size() != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("attn_dp_size (", c.attn_dp_size(), ") does not divide tp_size (", c.tp_size(), ")"));
  }
  if (c.pipeline_size() < 1) return absl::InvalidArgumentError("pipeline_size must be at least 1, got 0");
  if (c.pipeline_rank() >= c.pipeline_size()) {
    return absl::InvalidArgumentError(absl::StrCat("pipeline_rank (", c.pipeline_rank(),
                                                   ") must be below pipeline_size (", c.pipeline_size(), ")"));
  }
  if (c.first_layer() > c.last_layer()) {
    return absl::InvalidArgumentError(absl::StrCat("first_layer (", c.first_layer(), ") is after last_layer (",
                                                   c.last_layer(), ")"));
  }
  const bool first = c.pipeline_rank() == 0, last = c.pipeline_rank() + 1 == c.pipeline_size();
  if (first && c.first_layer() != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("first_layer must be 0 on pipeline rank 0, got ", c.first_layer()));
  }
  if (!first && c.previous_stage().ucx_address().empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("previous_stage.ucx_address is empty on pipeline rank ", c.pipeline_rank()));
  }
  if (!last && c.next_stage().ucx_address().empty()) {
    return absl::InvalidArgumentError(absl::StrCat("next_stage.ucx_address is empty on pipeline rank ",
                                                   c.pipeline_rank(), " of ", c.pipeline_size()));
  }
  return absl::OkStatus();
}

absl::Status CheckStageConfigAgainstModel(const v1::StageConfig& c, const weights::ModelConfig& model) {
  const int64_t layers = model.num_hidden_layers;
  if (static_cast<int64_t>(c.last_layer()) >= layers) {
    return absl::InvalidArgumentError(absl::StrCat("last_layer (", c.last_layer(), ") is beyond the model's ",
                                                   layers, " decoder layers (last index ", layers - 1, ")"));
  }
  if (c.pipeline_rank() + 1 == c.pipeline_size() && static_cast<int64_t>(c.last_layer()) != layers - 1) {
    return absl::InvalidArgumentError(absl::StrCat("last_layer must be ", layers - 1,
                                                   " (the model's last layer) on the last pipeline rank, got ",
                                                   c.last_layer()));
  }
  absl::Status parallel =
      weights::ValidateParallel(model, static_cast<int>(c.tp_size()), static_cast<int>(c.attn_dp_size()));
  if (!parallel.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("tp_size/attn_dp_size: ", parallel.message()));
  }
  return absl::OkStatus();
}

absl::Status CheckDescriptorOrder(const v1::MicrobatchDescriptor& d, uint64_t epoch,
                                  std::optional<uint64_t> last_sequence_number) {
  if (d.epoch() != epoch) {
    return absl::FailedPreconditionError(absl::StrCat("epoch: microbatch ", d.microbatch_id(), " carries epoch ",
                                                      d.epoch(), ", the stage is configured for epoch ", epoch));
  }
  if (last_sequence_number.has_value() && d.sequence_number() <= *last_sequence_number) {
    return absl::FailedPreconditionError(absl::StrCat(
        "sequence_number: microbatch ", d.microbatch_id(), " has sequence_number ", d.sequence_number(),
        ", not after the last one run (", *last_sequence_number, ")"));
  }
  return absl::OkStatus();
}

absl::Status CheckDescriptorContents(const v1::MicrobatchDescriptor& d, int64_t vocab) {
  if (d.sequences().empty()) {
    return absl::InvalidArgumentError(absl::StrCat("sequences: microbatch ", d.microbatch_id(), " has none"));
  }
  std::set<uint64_t> seen;
  for (int i = 0; i < d.sequences_size(); ++i) {
    const v1::SequenceEntry& s = d.sequences(i);
    if (!seen.insert(s.sequence_id()).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("sequences[", i, "].sequence_id: ", s.sequence_id(), " appears twice in the microbatch"));
    }
    if (s.token_ids().empty()) {
      return absl::InvalidArgumentError(absl::StrCat("sequences[", i, "].token_ids: sequence ", s.sequence_id(),
                                                     " (request '", s.request_id(), "') has no tokens"));
    }
    for (int j = 0; j < s.token_ids_size(); ++j) {
      const int32_t t = s.token_ids(j);
      if (t < 0 || t >= vocab) {
        return absl::InvalidArgumentError(absl::StrCat("sequences[", i, "].token_ids[", j, "]: token id ", t,
                                                       " is outside the vocabulary [0, ", vocab, ")"));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace seam::server
