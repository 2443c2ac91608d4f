// Token choice on the logits' device (see token_sampler.h).
#include "seam/runtime/token_sampler.h"

#include <limits>

#include "absl/strings/str_cat.h"
#include "seam/core/status.h"

namespace seam::runtime {
namespace {

// `logits` with every choice's edits applied, on its device: a copy when any
// choice edits (the logits stay the model's own), `logits` itself otherwise.
absl::StatusOr<Tensor> Edited(const Tensor& logits, const std::vector<TokenChoice>& choices) {
  std::vector<int32_t> at;
  std::vector<float> by;
  for (size_t i = 0; i < choices.size(); ++i) {
    for (const LogitEdit& e : choices[i].edits) {
      at.insert(at.end(), {static_cast<int32_t>(i), e.token});
      by.insert(by.end(), {e.repetition, e.offset});
    }
  }
  if (at.empty()) return logits;
  const int64_t edits = static_cast<int64_t>(by.size() / 2);
  Tensor work = logits.Clone();
  SEAM_ASSIGN_OR_RETURN(Tensor at_t, Tensor::FromInts(at, {edits, 2}).On(logits.device()));
  SEAM_ASSIGN_OR_RETURN(Tensor by_t, Tensor::FromFloats(by, {edits, 2}).On(logits.device()));
  SEAM_RETURN_IF_ERROR(kernels::EditLogits(work, at_t, by_t));
  return work;
}

// The log-probs of row `i`'s chosen token and top tokens, from the unedited logits.
absl::StatusOr<TokenLogprobs> LogprobsOf(const Tensor& logits, int64_t i, const Tensor& chosen, int32_t top) {
  const Tensor row = logits.Rows(i, 1);
  const Device device = logits.device();
  SEAM_ASSIGN_OR_RETURN(Tensor token, chosen.Rows(i, 1).Reshape({1, 1}));
  SEAM_ASSIGN_OR_RETURN(Tensor out, Tensor::TryEmpty({1, 1}, DType::kF32, device));
  SEAM_RETURN_IF_ERROR(kernels::TokenLogProbs(row, token, out));
  SEAM_ASSIGN_OR_RETURN(Tensor host, out.On(Device::CPU()));
  TokenLogprobs lp;
  lp.chosen = host.data<float>()[0];
  if (top == 0) return lp;
  SEAM_ASSIGN_OR_RETURN(Tensor values, Tensor::TryEmpty({1, top}, DType::kF32, device));
  SEAM_ASSIGN_OR_RETURN(Tensor indices, Tensor::TryEmpty({1, top}, DType::kI32, device));
  SEAM_RETURN_IF_ERROR(kernels::TopK(row, top, values, indices));
  SEAM_RETURN_IF_ERROR(kernels::TokenLogProbs(row, indices, values));  // the top values become their log-probs
  SEAM_ASSIGN_OR_RETURN(Tensor top_values, values.On(Device::CPU()));
  SEAM_ASSIGN_OR_RETURN(Tensor top_ids, indices.On(Device::CPU()));
  for (int32_t k = 0; k < top; ++k) lp.top.emplace_back(top_ids.data<int32_t>()[k], top_values.data<float>()[k]);
  return lp;
}

}  // namespace

absl::StatusOr<std::vector<int32_t>> ChooseTokens(const Tensor& logits, const std::vector<TokenChoice>& choices,
                                                  std::vector<TokenLogprobs>* logprobs) {
  const int64_t rows = static_cast<int64_t>(choices.size());
  if (logits.rank() != 2 || logits.dim(0) != rows || logits.dtype() != DType::kF32) {
    return absl::InvalidArgumentError(absl::StrCat("token choice: logits ", logits.DebugString(), " for ", rows,
                                                   " sequences (f32 [sequences, vocab] expected)"));
  }
  for (const TokenChoice& c : choices) {
    if (c.top_logprobs < 0 || c.top_logprobs > logits.dim(1)) {
      return absl::InvalidArgumentError(absl::StrCat("token choice: top_logprobs ", c.top_logprobs,
                                                     " outside [0, ", logits.dim(1), "]"));
    }
  }
  const Device device = logits.device();
  SEAM_ASSIGN_OR_RETURN(Tensor chosen, Tensor::TryEmpty({rows}, DType::kI32, device));
  SEAM_ASSIGN_OR_RETURN(const Tensor work, Edited(logits, choices));
  bool all_greedy = true;
  for (const TokenChoice& c : choices) all_greedy = all_greedy && c.params.temperature <= 0.0f;
  if (all_greedy) {
    SEAM_RETURN_IF_ERROR(kernels::Argmax(work, chosen));
  } else {
    std::vector<int32_t> step_values;
    for (const TokenChoice& c : choices) step_values.push_back(c.step);
    SEAM_ASSIGN_OR_RETURN(Tensor steps, Tensor::FromInts(step_values, {rows}).On(device));  // one upload
    for (int64_t i = 0; i < rows; ++i) {
      const Tensor row = work.Rows(i, 1);
      const Tensor out = chosen.Rows(i, 1);
      if (choices[i].params.temperature <= 0.0f) {
        SEAM_RETURN_IF_ERROR(kernels::Argmax(row, out));
        continue;
      }
      SEAM_RETURN_IF_ERROR(kernels::Sample(row, choices[i].params, steps.Rows(i, 1), out));
    }
  }
  if (logprobs != nullptr) {
    logprobs->assign(static_cast<size_t>(rows), TokenLogprobs{});
    for (int64_t i = 0; i < rows; ++i) {
      if (!choices[i].logprobs && choices[i].top_logprobs == 0) continue;
      SEAM_ASSIGN_OR_RETURN((*logprobs)[i], LogprobsOf(logits, i, chosen, choices[i].top_logprobs));
    }
  }
  SEAM_ASSIGN_OR_RETURN(Tensor host, chosen.On(Device::CPU()));
  return std::vector<int32_t>(host.data<int32_t>(), host.data<int32_t>() + rows);
}

std::vector<LogitEdit> PenaltyEdits(const PenaltyRule& rule, const std::map<int32_t, int32_t>& output_counts,
                                    const std::set<int32_t>& prompt_tokens, int64_t generated) {
  std::map<int32_t, LogitEdit> edits;
  auto edit = [&edits](int32_t token) -> LogitEdit& {
    LogitEdit& e = edits[token];
    e.token = token;
    return e;
  };
  for (const auto& [token, bias] : rule.bias) edit(token).offset = bias;
  if (rule.frequency != 0.0f || rule.presence != 0.0f) {
    for (const auto& [token, count] : output_counts) {
      LogitEdit& e = edit(token);
      e.offset -= rule.frequency * static_cast<float>(count);
      e.offset -= rule.presence;
    }
  }
  if (rule.repetition != 1.0f && rule.repetition > 0.0f) {
    for (int32_t token : prompt_tokens) edit(token).repetition = rule.repetition;
    for (const auto& [token, count] : output_counts) edit(token).repetition = rule.repetition;
  }
  if (generated < rule.min_tokens) {
    for (int32_t token : rule.masked) edit(token).offset = -std::numeric_limits<float>::infinity();
  }
  std::vector<LogitEdit> out;
  out.reserve(edits.size());
  for (auto& [token, e] : edits) out.push_back(e);
  return out;
}

}  // namespace seam::runtime
