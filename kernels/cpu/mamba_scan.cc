// Mamba2's selective scan on the CPU: the recurrence run token by token in
// fp32 for every (sequence, head), starting from the sequence's stored state
// (zero for padding) and storing the final state back.
#include <algorithm>
#include <cmath>
#include <vector>

#include "cpu/cpu_ops.h"
#include "cpu/float_rows.h"
#include "cpu/sequence_rows.h"
#include "seam/core/status.h"

namespace seam::kernels::cpu {
namespace {

// torch.nn.functional.softplus with its default threshold of 20.
float Softplus(float v) { return v > 20.0f ? v : std::log1p(std::exp(v)); }

}  // namespace

absl::Status SelectiveScan(const SelectiveScanParams& p) {
  const int64_t tokens = p.x.dim(0), heads = p.x.dim(1), hd = p.x.dim(2);
  const int64_t groups = p.b.dim(1), n = p.b.dim(2), per_group = heads / groups;
  SEAM_ASSIGN_OR_RETURN(std::vector<SequenceRows> rows, ReadSequenceRows(p.seqs, tokens, p.ssm_state.dim(0)));
  std::vector<float> dt_bias(heads), a(heads), d(heads);
  LoadFloats(p.dt_bias.raw_data(), p.dt_bias.dtype(), 0, heads, dt_bias.data());
  LoadFloats(p.a.raw_data(), p.a.dtype(), 0, heads, a.data());
  LoadFloats(p.d.raw_data(), p.d.dtype(), 0, heads, d.data());
  float* states = p.ssm_state.data<float>();
  const int64_t state_size = heads * hd * n;
  std::vector<float> state(state_size), x(heads * hd), dt(heads), b(groups * n), c(groups * n), y(heads * hd);
  for (const SequenceRows& s : rows) {
    if (s.slot >= 0) {
      std::copy(states + s.slot * state_size, states + (s.slot + 1) * state_size, state.begin());
    } else {
      std::fill(state.begin(), state.end(), 0.0f);
    }
    for (int64_t t = s.begin; t < s.end; ++t) {
      LoadFloats(p.x.raw_data(), p.x.dtype(), t * heads * hd, heads * hd, x.data());
      LoadFloats(p.dt.raw_data(), p.dt.dtype(), t * heads, heads, dt.data());
      LoadFloats(p.b.raw_data(), p.b.dtype(), t * groups * n, groups * n, b.data());
      LoadFloats(p.c.raw_data(), p.c.dtype(), t * groups * n, groups * n, c.data());
      for (int64_t h = 0; h < heads; ++h) {
        const float step = std::clamp(Softplus(dt[h] + dt_bias[h]), p.dt_min, p.dt_max);
        const float decay = std::exp(step * a[h]);
        const float* bg = b.data() + (h / per_group) * n;
        const float* cg = c.data() + (h / per_group) * n;
        for (int64_t i = 0; i < hd; ++i) {
          const float xi = x[h * hd + i];
          float* row = state.data() + (h * hd + i) * n;
          float acc = 0.0f;
          for (int64_t j = 0; j < n; ++j) {
            row[j] = decay * row[j] + step * xi * bg[j];
            acc += row[j] * cg[j];
          }
          y[h * hd + i] = acc + d[h] * xi;
        }
      }
      StoreFloats(y.data(), heads * hd, p.out.raw_data(), p.out.dtype(), t * heads * hd);
    }
    if (s.slot >= 0) std::copy(state.begin(), state.end(), states + s.slot * state_size);
  }
  return absl::OkStatus();
}

}  // namespace seam::kernels::cpu
