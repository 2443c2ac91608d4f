// Token choice on the logits' device (see token_sampler.h).
#include "seam/runtime/token_sampler.h"

#include "absl/strings/str_cat.h"
#include "seam/core/status.h"

namespace seam::runtime {

absl::StatusOr<std::vector<int32_t>> ChooseTokens(const Tensor& logits, const std::vector<TokenChoice>& choices) {
  const int64_t rows = static_cast<int64_t>(choices.size());
  if (logits.rank() != 2 || logits.dim(0) != rows || logits.dtype() != DType::kF32) {
    return absl::InvalidArgumentError(absl::StrCat("token choice: logits ", logits.DebugString(), " for ", rows,
                                                   " sequences (f32 [sequences, vocab] expected)"));
  }
  const Device device = logits.device();
  SEAM_ASSIGN_OR_RETURN(Tensor chosen, Tensor::TryEmpty({rows}, DType::kI32, device));
  bool all_greedy = true;
  for (const TokenChoice& c : choices) all_greedy = all_greedy && c.params.temperature <= 0.0f;
  if (all_greedy) {
    SEAM_RETURN_IF_ERROR(kernels::Argmax(logits, chosen));
  } else {
    std::vector<int32_t> step_values;
    for (const TokenChoice& c : choices) step_values.push_back(c.step);
    SEAM_ASSIGN_OR_RETURN(Tensor steps, Tensor::FromInts(step_values, {rows}).On(device));  // one upload
    for (int64_t i = 0; i < rows; ++i) {
      const Tensor row = logits.Rows(i, 1);
      const Tensor out = chosen.Rows(i, 1);
      if (choices[i].params.temperature <= 0.0f) {
        SEAM_RETURN_IF_ERROR(kernels::Argmax(row, out));
        continue;
      }
      SEAM_RETURN_IF_ERROR(kernels::Sample(row, choices[i].params, steps.Rows(i, 1), out));
    }
  }
  SEAM_ASSIGN_OR_RETURN(Tensor host, chosen.On(Device::CPU()));
  return std::vector<int32_t>(host.data<int32_t>(), host.data<int32_t>() + rows);
}

}  // namespace seam::runtime
