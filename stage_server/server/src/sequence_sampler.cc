// Per-sequence sampling and token log-probs at the last stage.
#include "sequence_sampler.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "seam/core/status.h"
#include "seam/kernels/ops.h"

namespace seam::server {
namespace {

kernels::SamplingParams ToKernelParams(const v1::SamplingParams& p) {
  kernels::SamplingParams k;
  k.temperature = p.temperature();
  k.top_k = static_cast<int32_t>(p.top_k());
  k.top_p = (p.top_p() <= 0.0f || p.top_p() >= 1.0f) ? 1.0f : p.top_p();
  k.seed = p.seed();
  return k;
}

// log softmax(row)[token], in double.
float LogProb(const float* row, int64_t vocab, int32_t token) {
  double max = row[0];
  for (int64_t v = 1; v < vocab; ++v) max = std::fmax(max, static_cast<double>(row[v]));
  double sum = 0.0;
  for (int64_t v = 0; v < vocab; ++v) sum += std::exp(static_cast<double>(row[v]) - max);
  return static_cast<float>(static_cast<double>(row[token]) - max - std::log(sum));
}

}  // namespace

bool SequenceSampler::NeedsAllLogits(const v1::MicrobatchDescriptor& d) {
  for (const v1::SequenceEntry& s : d.sequences()) {
    if (s.return_token_logprobs()) return true;
  }
  return false;
}

int32_t SequenceSampler::StepOf(const v1::SequenceEntry& entry, uint32_t ahead) {
  const uint64_t end = entry.position_start() + ahead + static_cast<uint64_t>(entry.token_ids_size());
  if (entry.is_prefill()) {
    prompt_end_[entry.sequence_id()] = end;
    return 0;
  }
  auto it = prompt_end_.find(entry.sequence_id());
  // A decode step of a sequence whose prompt this stage did not see counts
  // from the start of the sequence.
  const uint64_t prompt = it == prompt_end_.end() ? 0 : it->second;
  return static_cast<int32_t>(end > prompt ? end - prompt : 0);
}

absl::StatusOr<std::vector<v1::SequenceResult>> SequenceSampler::Sample(const v1::MicrobatchDescriptor& d,
                                                                        const std::vector<Tensor>& logits,
                                                                        bool all_logits) {
  if (static_cast<int>(logits.size()) != d.sequences_size()) {
    return absl::InternalError(
        absl::StrCat("got logits for ", logits.size(), " sequences, the microbatch has ", d.sequences_size()));
  }
  std::vector<v1::SequenceResult> results;
  for (int i = 0; i < d.sequences_size(); ++i) {
    const v1::SequenceEntry& s = d.sequences(i);
    const Tensor& rows = logits[i];
    const int64_t vocab = rows.dim(1), n = s.token_ids_size();
    if (rows.dtype() != DType::kF32 || rows.dim(0) != (all_logits ? n : 1)) {
      return absl::InternalError(absl::StrCat("sequence ", s.sequence_id(), ": logits ", rows.DebugString(),
                                              " do not fit ", n, " tokens"));
    }
    Tensor last = rows.Rows(rows.dim(0) - 1, 1).Clone();
    Tensor steps = Tensor::FromInts({StepOf(s)}, {1});
    Tensor out = Tensor::Empty({1}, DType::kI32);
    v1::SequenceResult r;
    r.set_sequence_id(s.sequence_id());
    r.set_request_id(s.request_id());
    absl::Status sampled = kernels::Sample(last, ToKernelParams(s.sampling()), steps, out);
    if (!sampled.ok()) {
      v1::StageError* e = r.mutable_error();
      e->set_code(static_cast<int>(sampled.code()));
      e->set_message(absl::StrCat("sampling sequence ", s.sequence_id(), ": ", sampled.message()));
    } else {
      r.set_sampled_token(out.data<int32_t>()[0]);
    }
    if (s.return_token_logprobs()) {
      const Tensor dense = rows.Clone();
      const float* data = dense.data<float>();
      for (int64_t j = 0; j + 1 < n; ++j) r.add_token_logprobs(LogProb(data + j * vocab, vocab, s.token_ids(j + 1)));
    }
    results.push_back(std::move(r));
  }
  return results;
}

std::vector<runtime::TokenChoice> SequenceSampler::Choices(const v1::MicrobatchDescriptor& d, uint32_t ahead) {
  std::vector<runtime::TokenChoice> choices;
  for (const v1::SequenceEntry& s : d.sequences()) {
    choices.push_back(runtime::TokenChoice{ToKernelParams(s.sampling()), StepOf(s, ahead)});
  }
  return choices;
}

std::vector<v1::SequenceResult> SequenceSampler::Results(const v1::MicrobatchDescriptor& d,
                                                         const std::vector<int32_t>& tokens) {
  std::vector<v1::SequenceResult> results;
  for (int i = 0; i < d.sequences_size(); ++i) {
    v1::SequenceResult r;
    r.set_sequence_id(d.sequences(i).sequence_id());
    r.set_request_id(d.sequences(i).request_id());
    r.set_sampled_token(tokens[i]);
    results.push_back(std::move(r));
  }
  return results;
}

}  // namespace seam::server
