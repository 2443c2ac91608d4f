// The pipeline handoff between neighbouring stages as this server frames it:
// per-TP-rank boundary::PipelineTensors become tensors named "r<rank>.hidden"
// (and "r<rank>.residual" for a pending stream) under a StreamState header
// declaring the producer's facts; the receiver checks that header against
// what it derives from its own configuration before taking any payload.
// ProducerFacts.exit_policy names the reduction policy the producer's exit
// was bound with and ProducerFacts.row_form which rows each rank's tensors
// hold. Every Qwen3 / Qwen3-MoE decoder layer ends with its FFN, so the
// producer's last stage is an FFN. attn_dp_row_counts[g] counts DP group g's
// rows: those of any one of its ranks on dp_rows, the sum over its ranks
// otherwise.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "seam/boundary/pipeline_handoff.h"
#include "seam/core/tensor.h"
#include "seam/runtime/stage_group.h"
#include "seam/v1/stage_service.pb.h"
#include "seam/v1/stream_state.pb.h"

namespace seam::server {

// Tokens of all sequences of a microbatch.
uint64_t TokenCount(const v1::MicrobatchDescriptor& d);

struct OutgoingHandoff {
  v1::StreamState header;  // lists no tensors (the sender fills them in)
  std::vector<std::pair<std::string, Tensor>> tensors;
};

// Frames this stage's output for microbatch `d`. INVALID_ARGUMENT when the
// ranks' tensors disagree on their state or row form.
absl::StatusOr<OutgoingHandoff> FrameHandoff(const v1::MicrobatchDescriptor& d, const v1::StageConfig& config,
                                             const runtime::StageGroup& group,
                                             const std::vector<boundary::PipelineTensors>& ranks);

// Checks a received header for microbatch `d` against this (receiving)
// stage: producer facts (against `config` and the kind and exit policy this
// stage derives for its producer from the same model), token counts and the
// tensor list with each tensor's shape. The one check of a handoff's shape
// on the receiving side before its payloads are taken (the boundary's
// CheckPipelineTensors then checks the tensors against each rank's rows).
// INVALID_ARGUMENT naming the field.
absl::Status CheckHandoffHeader(const v1::StreamState& header, const v1::MicrobatchDescriptor& d,
                                const v1::StageConfig& config, const runtime::StageGroup& group);

// Splits verified tensors (in header order, of a header that passed
// CheckHandoffHeader) back into one handoff per TP rank.
std::vector<boundary::PipelineTensors> UnframeHandoff(const v1::StreamState& header, std::vector<Tensor> tensors,
                                                      int tp);

}  // namespace seam::server
