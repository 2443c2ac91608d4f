// Per-sequence sampling, its history and token log-probs at the last stage.
#include "sequence_sampler.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "seam/core/status.h"

namespace seam::server {
namespace {

kernels::SamplingParams ToKernelParams(const v1::SequenceSampling& p) {
  kernels::SamplingParams k;
  k.temperature = p.temperature();
  k.top_k = static_cast<int32_t>(p.top_k());
  k.top_p = (p.top_p() <= 0.0f || p.top_p() >= 1.0f) ? 1.0f : p.top_p();
  k.seed = p.seed();
  return k;
}

runtime::PenaltyRule RuleOf(const v1::SequenceSampling& p) {
  runtime::PenaltyRule rule;
  rule.presence = p.presence_penalty();
  rule.frequency = p.frequency_penalty();
  rule.repetition = p.repetition_penalty() > 0.0f ? p.repetition_penalty() : 1.0f;
  for (const v1::LogitBias& b : p.logit_bias()) rule.bias.emplace_back(b.token_id(), b.bias());
  rule.min_tokens = static_cast<int32_t>(p.min_tokens());
  rule.masked.assign(p.min_tokens_masked().begin(), p.min_tokens_masked().end());
  return rule;
}

bool CountsOutput(const runtime::PenaltyRule& r) {
  return r.presence != 0.0f || r.frequency != 0.0f || r.repetition != 1.0f;
}

// log softmax(row)[token], in double.
float LogProb(const float* row, int64_t vocab, int32_t token) {
  double max = row[0];
  for (int64_t v = 1; v < vocab; ++v) max = std::fmax(max, static_cast<double>(row[v]));
  double sum = 0.0;
  for (int64_t v = 0; v < vocab; ++v) sum += std::exp(static_cast<double>(row[v]) - max);
  return static_cast<float>(static_cast<double>(row[token]) - max - std::log(sum));
}

v1::SequenceResult ResultOf(const v1::SequenceEntry& s) {
  v1::SequenceResult r;
  r.set_sequence_id(s.sequence_id());
  r.set_server_request_id(s.server_request_id());
  return r;
}

void SetLogprobs(const runtime::TokenLogprobs& lp, int32_t token, v1::SequenceResult& r) {
  v1::ChosenTokenLogprobs* out = r.mutable_sampled_logprobs();
  out->set_token_id(token);
  out->set_logprob(lp.chosen);
  for (const auto& [id, logprob] : lp.top) {
    v1::TokenLogprob* t = out->add_top();
    t->set_token_id(id);
    t->set_logprob(logprob);
  }
}

}  // namespace

bool SequenceSampler::NeedsAllLogits(const v1::MicrobatchDescriptor& d) {
  for (const v1::SequenceEntry& s : d.sequences()) {
    if (s.return_token_logprobs()) return true;
  }
  return false;
}

absl::Status SequenceSampler::Take(const v1::MicrobatchDescriptor& d) {
  for (int i = 0; i < d.sequences_size(); ++i) {
    const v1::SequenceEntry& s = d.sequences(i);
    if (s.has_sampling()) {
      History& h = sequences_[s.sequence_id()];
      // A sequence's life starts here (after the cached blocks it maps).
      if (s.is_prefill() && (s.position_start() == 0 || s.shared_block_ids_size() > 0)) h = History{};
      h.sampling = s.sampling();
      h.rule = RuleOf(s.sampling());
      if (s.sampling().prompt_tokens() > 0) h.prompt_end = s.sampling().prompt_tokens();
    }
    auto it = sequences_.find(s.sequence_id());
    if (it == sequences_.end()) {
      return absl::InvalidArgumentError(absl::StrCat("sequences[", i, "]: sequence ", s.sequence_id(), " (request '",
                                                     s.server_request_id(), "') has no sampling: its first entry "
                                                     "brings one to the last stage"));
    }
    History& h = it->second;
    if (!s.is_prefill()) continue;
    const uint64_t end = s.position_start() + static_cast<uint64_t>(s.token_ids_size());
    if (h.sampling.prompt_tokens() == 0) h.prompt_end = end;  // this prefill ends the prompt
    for (int j = 0; j < s.token_ids_size(); ++j) {
      if (s.position_start() + j < h.prompt_end) {
        if (h.rule.repetition != 1.0f) h.prompt_tokens.insert(s.token_ids(j));
      } else {
        Record(s.sequence_id(), s.token_ids(j));  // generated before a recomputation
      }
    }
  }
  return absl::OkStatus();
}

int32_t SequenceSampler::StepOf(const v1::SequenceEntry& entry, uint32_t ahead) const {
  auto it = sequences_.find(entry.sequence_id());
  if (it == sequences_.end()) return 0;
  const uint64_t end = entry.position_start() + ahead + static_cast<uint64_t>(entry.token_ids_size());
  return static_cast<int32_t>(end > it->second.prompt_end ? end - it->second.prompt_end : 0);
}

void SequenceSampler::RecordChosen(const v1::SequenceEntry& entry, int32_t token) {
  auto it = sequences_.find(entry.sequence_id());
  if (it == sequences_.end()) return;
  const uint64_t end = entry.position_start() + static_cast<uint64_t>(entry.token_ids_size());
  if (entry.is_prefill() && end < it->second.prompt_end) return;
  Record(entry.sequence_id(), token);
}

void SequenceSampler::Record(uint64_t sequence, int32_t token) {
  auto it = sequences_.find(sequence);
  if (it != sequences_.end() && CountsOutput(it->second.rule)) ++it->second.output_counts[token];
}

std::vector<runtime::TokenChoice> SequenceSampler::Choices(const v1::MicrobatchDescriptor& d, uint32_t ahead) const {
  std::vector<runtime::TokenChoice> choices;
  for (const v1::SequenceEntry& s : d.sequences()) {
    runtime::TokenChoice c;
    c.step = StepOf(s, ahead);
    auto it = sequences_.find(s.sequence_id());
    if (it != sequences_.end()) {  // Take refused a step without one
      const History& h = it->second;
      c.params = ToKernelParams(h.sampling);
      c.edits = runtime::PenaltyEdits(h.rule, h.output_counts, h.prompt_tokens, c.step);
      c.logprobs = h.sampling.logprobs();
      c.top_logprobs = static_cast<int32_t>(h.sampling.top_logprobs());
    } else {
      c.params.temperature = 0.0f;
    }
    choices.push_back(std::move(c));
  }
  return choices;
}

bool SequenceSampler::Plain(const v1::MicrobatchDescriptor& d) const {
  for (const v1::SequenceEntry& s : d.sequences()) {
    auto it = sequences_.find(s.sequence_id());
    if (it == sequences_.end()) return false;
    const runtime::PenaltyRule& r = it->second.rule;
    const v1::SequenceSampling& p = it->second.sampling;
    if (CountsOutput(r) || !r.bias.empty() || (r.min_tokens > 0 && !r.masked.empty()) || p.logprobs() ||
        p.top_logprobs() > 0) {
      return false;
    }
  }
  return true;
}

std::vector<v1::SequenceResult> SequenceSampler::Results(const v1::MicrobatchDescriptor& d,
                                                         const std::vector<int32_t>& tokens,
                                                         const std::vector<runtime::TokenLogprobs>& logprobs) {
  std::vector<v1::SequenceResult> results;
  for (int i = 0; i < d.sequences_size(); ++i) {
    const v1::SequenceEntry& s = d.sequences(i);
    v1::SequenceResult r = ResultOf(s);
    r.set_sampled_token(tokens[i]);
    RecordChosen(s, tokens[i]);
    auto it = sequences_.find(s.sequence_id());
    if (it != sequences_.end() && (it->second.sampling.logprobs() || it->second.sampling.top_logprobs() > 0) &&
        static_cast<size_t>(i) < logprobs.size()) {
      SetLogprobs(logprobs[i], tokens[i], r);
    }
    results.push_back(std::move(r));
  }
  return results;
}

absl::StatusOr<std::vector<v1::SequenceResult>> SequenceSampler::Sample(const v1::MicrobatchDescriptor& d,
                                                                        const std::vector<Tensor>& logits,
                                                                        bool all_logits) {
  if (static_cast<int>(logits.size()) != d.sequences_size()) {
    return absl::InternalError(
        absl::StrCat("got logits for ", logits.size(), " sequences, the microbatch has ", d.sequences_size()));
  }
  const std::vector<runtime::TokenChoice> choices = Choices(d);
  std::vector<v1::SequenceResult> results;
  for (int i = 0; i < d.sequences_size(); ++i) {
    const v1::SequenceEntry& s = d.sequences(i);
    const Tensor& rows = logits[i];
    const int64_t vocab = rows.dim(1), n = s.token_ids_size();
    if (rows.dtype() != DType::kF32 || rows.dim(0) != (all_logits ? n : 1)) {
      return absl::InternalError(absl::StrCat("sequence ", s.sequence_id(), ": logits ", rows.DebugString(),
                                              " do not fit ", n, " tokens"));
    }
    v1::SequenceResult r = ResultOf(s);
    std::vector<runtime::TokenLogprobs> lp;
    absl::StatusOr<std::vector<int32_t>> token =
        runtime::ChooseTokens(rows.Rows(rows.dim(0) - 1, 1).Clone(), {choices[i]}, &lp);
    if (!token.ok()) {
      v1::StageError* e = r.mutable_error();
      e->set_code(static_cast<int>(token.status().code()));
      e->set_message(absl::StrCat("sampling sequence ", s.sequence_id(), ": ", token.status().message()));
    } else {
      r.set_sampled_token((*token)[0]);
      RecordChosen(s, (*token)[0]);
      if (choices[i].logprobs || choices[i].top_logprobs > 0) SetLogprobs(lp[0], (*token)[0], r);
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

}  // namespace seam::server
