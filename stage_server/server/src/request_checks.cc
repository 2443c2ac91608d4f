// Field-by-field checks of stage configurations and microbatch descriptors.
#include "request_checks.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <set>

#include "absl/strings/str_cat.h"
#include "seam/core/status.h"

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
                                  uint64_t last_sequence_number) {
  if (d.epoch() != epoch) {
    return absl::FailedPreconditionError(absl::StrCat("epoch: microbatch ", d.microbatch_id(), " carries epoch ",
                                                      d.epoch(), ", the stage is configured for epoch ", epoch));
  }
  if (d.sequence_number() != last_sequence_number + 1) {
    return absl::FailedPreconditionError(absl::StrCat(
        "sequence_number: microbatch ", d.microbatch_id(), " has sequence_number ", d.sequence_number(),
        ", the stage expects ", last_sequence_number + 1, " next in epoch ", epoch));
  }
  return absl::OkStatus();
}

uint64_t MaxDescriptorBytes(int64_t max_step_tokens) {
  const uint64_t tokens = static_cast<uint64_t>(std::max<int64_t>(max_step_tokens, 1));
  // Per sequence: the request id, sequence id, position, flags, DP group and
  // sampling with its masked tokens and logit biases, each with its field framing.
  constexpr uint64_t kSequenceOverhead = 192 + 5 * kMaxStopTokens + 5 * kMaxMaskedTokens + 12 * kMaxLogitBias;
  constexpr uint64_t kTokenBytes = 5;        // an int32 varint, at most 5 bytes when non-negative
  constexpr uint64_t kFinishedIdBytes = 11;  // a uint64 varint and its tag
  // Prefix caching: a published and an evicted CachedBlock (4 fields each)
  // and a shared block id per token; a long shared prefix rides on the 1 MiB floor.
  constexpr uint64_t kCachedBlockBytes = 2 * 4 * 11 + 11;
  // 96: the descriptor's own fields (ids, epoch, steps, wave, budget), each at most 11 bytes.
  const uint64_t bytes = 96 + tokens * (kMaxRequestIdBytes + kSequenceOverhead + kTokenBytes + kFinishedIdBytes + kCachedBlockBytes);
  return std::max<uint64_t>(bytes, uint64_t{1} << 20);  // room for Configure and the control calls
}

uint64_t MaxHandoffPayloadBytes(const weights::ModelConfig& model, int tp, int attn_dp, DType dtype,
                                int64_t max_step_tokens) {
  // Padded row forms hold every DP group's rows on each rank.
  const uint64_t rows = static_cast<uint64_t>(std::max<int64_t>(max_step_tokens, 1)) * std::max(attn_dp, 1);
  return rows * static_cast<uint64_t>(model.hidden_size) * DTypeSize(dtype) * 2 * static_cast<uint64_t>(tp);
}

namespace {

absl::Status CheckToken(const std::string& field, int32_t t, int64_t vocab) {
  if (t >= 0 && t < vocab) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(field, ": token id ", t, " is outside the vocabulary [0, ", vocab,
                                                 ")"));
}

absl::Status CheckSampling(const std::string& at, const v1::SequenceSampling& p, int64_t vocab) {
  const std::pair<const char*, float> finite[] = {{"temperature", p.temperature()},
                                                  {"top_p", p.top_p()},
                                                  {"presence_penalty", p.presence_penalty()},
                                                  {"frequency_penalty", p.frequency_penalty()},
                                                  {"repetition_penalty", p.repetition_penalty()}};
  for (const auto& [name, value] : finite) {
    if (!std::isfinite(value)) return absl::InvalidArgumentError(absl::StrCat(at, name, ": ", value, " is not finite"));
  }
  if (p.top_p() < 0 || p.top_p() > 1 || p.repetition_penalty() < 0 || p.top_k() > vocab) {
    return absl::InvalidArgumentError(absl::StrCat(at, "top_p ", p.top_p(), ", repetition_penalty ",
                                                   p.repetition_penalty(), ", top_k ", p.top_k(),
                                                   ": top_p must be in [0, 1], repetition_penalty >= 0, top_k <= ",
                                                   vocab));
  }
  if (p.logit_bias_size() > kMaxLogitBias || p.min_tokens_masked_size() > kMaxMaskedTokens ||
      p.top_logprobs() > static_cast<uint32_t>(kMaxTopLogprobs)) {
    return absl::InvalidArgumentError(absl::StrCat(at, p.logit_bias_size(), " logit biases, ",
                                                   p.min_tokens_masked_size(), " masked tokens, top_logprobs ",
                                                   p.top_logprobs(), ": at most ", kMaxLogitBias, ", ",
                                                   kMaxMaskedTokens, " and ", kMaxTopLogprobs));
  }
  std::set<int32_t> biased;
  for (int k = 0; k < p.logit_bias_size(); ++k) {
    const v1::LogitBias& b = p.logit_bias(k);
    const std::string field = absl::StrCat(at, "logit_bias[", k, "]");
    SEAM_RETURN_IF_ERROR(CheckToken(field, b.token_id(), vocab));
    if (!std::isfinite(b.bias()) || !biased.insert(b.token_id()).second) {
      return absl::InvalidArgumentError(absl::StrCat(field, ": bias ", b.bias(), " on token ", b.token_id(),
                                                     " (finite, one per token)"));
    }
  }
  for (int k = 0; k < p.min_tokens_masked_size(); ++k) {
    SEAM_RETURN_IF_ERROR(CheckToken(absl::StrCat(at, "min_tokens_masked[", k, "]"), p.min_tokens_masked(k), vocab));
  }
  return absl::OkStatus();
}

}  // namespace

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
                                                     " (request '", s.server_request_id(), "') has no tokens"));
    }
    for (int j = 0; j < s.token_ids_size(); ++j) {
      const int32_t t = s.token_ids(j);
      if (t < 0 || t >= vocab) {
        return absl::InvalidArgumentError(absl::StrCat("sequences[", i, "].token_ids[", j, "]: token id ", t,
                                                       " (request '", s.server_request_id(),
                                                       "') is outside the vocabulary [0, ", vocab, ")"));
      }
    }
    if (s.has_sampling()) {
      SEAM_RETURN_IF_ERROR(CheckSampling(absl::StrCat("sequences[", i, "].sampling."), s.sampling(), vocab));
    }
  }
  return absl::OkStatus();
}

}  // namespace seam::server
