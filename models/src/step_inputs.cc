#include "src/step_inputs.h"

#include "absl/strings/str_cat.h"
#include "seam/core/status.h"

namespace seam::models::internal {

absl::Status CheckPieceArgs(bool first, bool last, const boundary::PipelineTensors* in,
                            const boundary::PipelineTensors* out) {
  if (first != (in == nullptr)) {
    return absl::InvalidArgumentError(first ? "the first pipeline piece takes no handoff"
                                            : "a pipeline piece after the first needs the previous piece's handoff");
  }
  if (!last && out == nullptr) {
    return absl::InvalidArgumentError("a pipeline piece before the last needs somewhere to write its handoff");
  }
  return absl::OkStatus();
}

absl::StatusOr<DeviceStep> PrepareStep(const weights::ModelConfig& c, const ModelOptions& options, bool first,
                                       bool last, const boundary::ForwardBatch& batch, const StepInput& input,
                                       const boundary::PipelineTensors* in) {
  DeviceStep step;
  std::vector<int32_t> ids;
  for (const SequenceStep& s : input.sequences) {
    if (s.tokens.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("sequence ", s.sequence, " has no tokens in this step"));
    }
    for (int32_t t : s.tokens) {
      if (first && (t < 0 || t >= c.vocab_size)) {
        return absl::InvalidArgumentError(
            absl::StrCat("sequence ", s.sequence, ": token ", t, " is outside the vocabulary of ", c.vocab_size));
      }
    }
    step.spans.push_back(CacheSpan{s.sequence, s.start, static_cast<int64_t>(s.tokens.size())});
    ids.insert(ids.end(), s.tokens.begin(), s.tokens.end());
  }
  const int64_t rows = static_cast<int64_t>(ids.size());
  if (rows != batch.rows.my_dp_rows()) {
    return absl::InvalidArgumentError(absl::StrCat("the step holds ", rows, " tokens but the batch gives DP group ",
                                                   batch.rows.topology().dp_rank(), " ", batch.rows.my_dp_rows(),
                                                   " rows"));
  }
  const Device dev = options.device;
  if (first) {
    SEAM_ASSIGN_OR_RETURN(step.ids, Tensor::FromInts(ids, {rows}).On(dev));
  } else {
    for (const Tensor* t : {&in->hidden, &in->residual}) {
      if (t->defined() && (t->shape().size() != 2 || t->shape()[1] != c.hidden_size)) {
        return absl::InvalidArgumentError(absl::StrCat("a pipeline handoff tensor is ", ShapeToString(t->shape()),
                                                       "; this model's hidden size is ", c.hidden_size));
      }
    }
  }
  if (last && !input.all_logits) {
    std::vector<int32_t> selected;
    int32_t end = 0;
    for (const SequenceStep& s : input.sequences) selected.push_back((end += s.tokens.size()) - 1);
    if (end != static_cast<int32_t>(selected.size())) {  // otherwise every row is a last row
      SEAM_ASSIGN_OR_RETURN(step.last_rows,
                            Tensor::FromInts(selected, {static_cast<int64_t>(selected.size())}).On(dev));
    }
  }
  return step;
}

absl::Status ReserveStep(KvCache& cache, DeviceStep* step) {
  SEAM_RETURN_IF_ERROR(cache.Reserve(step->spans));
  SEAM_ASSIGN_OR_RETURN(step->cache, cache.BuildBatch(step->spans));
  return absl::OkStatus();
}

}  // namespace seam::models::internal
