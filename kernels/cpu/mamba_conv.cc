// Causal depthwise conv1d of Mamba2 on the CPU: each sequence's window is its
// K - 1 stored inputs followed by this step's rows; the window's tail becomes
// the new state. fp32 arithmetic, one rounding per output element.
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cpu/cpu_ops.h"
#include "cpu/float_rows.h"
#include "cpu/sequence_rows.h"
#include "seam/core/status.h"

namespace seam::kernels::cpu {

absl::StatusOr<std::vector<SequenceRows>> ReadSequenceRows(const SequenceStates& seqs, int64_t tokens,
                                                           int64_t slots) {
  const int64_t n = seqs.state_slots.dim(0);
  const int32_t* qs = seqs.query_start.data<int32_t>();
  const int32_t* slot = seqs.state_slots.data<int32_t>();
  if (qs[0] != 0 || qs[n] != tokens) {
    return absl::InvalidArgumentError(absl::StrCat("query_start: must run from 0 to the ", tokens,
                                                   " rows, got ", qs[0], " .. ", qs[n]));
  }
  std::vector<SequenceRows> out(n);
  for (int64_t s = 0; s < n; ++s) {
    if (qs[s + 1] < qs[s]) {
      return absl::InvalidArgumentError(absl::StrCat("query_start: sequence ", s, " ends before it starts"));
    }
    if (slot[s] >= slots) {
      return absl::InvalidArgumentError(
          absl::StrCat("state_slots: sequence ", s, " names slot ", slot[s], " of ", slots));
    }
    out[s] = SequenceRows{qs[s], qs[s + 1], slot[s]};
  }
  return out;
}

absl::Status CausalConv1d(const Tensor& x, const Tensor& weight, const Tensor& bias, bool silu,
                          const Tensor& conv_state, const SequenceStates& seqs, const Tensor& out) {
  const int64_t channels = x.dim(1), k = weight.dim(1), kept = k - 1;
  SEAM_ASSIGN_OR_RETURN(std::vector<SequenceRows> rows, ReadSequenceRows(seqs, x.dim(0), conv_state.dim(0)));
  std::vector<float> w(channels * k), b(channels, 0.0f);
  LoadFloats(weight.raw_data(), weight.dtype(), 0, channels * k, w.data());
  if (bias.defined()) LoadFloats(bias.raw_data(), bias.dtype(), 0, channels, b.data());
  std::vector<float> window, result(channels);
  for (const SequenceRows& s : rows) {
    const int64_t len = s.end - s.begin;
    // The window u: kept stored rows, then this step's rows; [kept + len, C].
    window.assign((kept + len) * channels, 0.0f);
    if (s.slot >= 0 && kept > 0) {
      LoadFloats(conv_state.raw_data(), conv_state.dtype(), s.slot * kept * channels, kept * channels,
                 window.data());
    }
    LoadFloats(x.raw_data(), x.dtype(), s.begin * channels, len * channels, window.data() + kept * channels);
    for (int64_t t = 0; t < len; ++t) {
      for (int64_t c = 0; c < channels; ++c) {
        float acc = b[c];
        for (int64_t j = 0; j < k; ++j) acc += w[c * k + j] * window[(t + j) * channels + c];
        result[c] = silu ? acc / (1.0f + std::exp(-acc)) : acc;
      }
      StoreFloats(result.data(), channels, out.raw_data(), out.dtype(), (s.begin + t) * channels);
    }
    if (s.slot >= 0 && kept > 0) {
      StoreFloats(window.data() + len * channels, kept * channels, conv_state.raw_data(), conv_state.dtype(),
                  s.slot * kept * channels);
    }
  }
  return absl::OkStatus();
}

}  // namespace seam::kernels::cpu
