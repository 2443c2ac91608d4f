// Qwen3's fused attention input on the CPU: the reference composition of the
// separate ops (copy out q, k and v; per-head RMSNorm of q and k; rotary
// embedding; cache write), so the CPU path computes exactly what it computed
// before the op was fused.
#include <cstring>

#include "cpu/cpu_ops.h"
#include "seam/core/status.h"

namespace seam::kernels::cpu {
namespace {

// Columns [begin, begin + width) of x [T, C] as a new contiguous [T, width].
Tensor Columns(const Tensor& x, int64_t begin, int64_t width) {
  const int64_t t = x.dim(0), cols = x.dim(1);
  const size_t es = DTypeSize(x.dtype());
  Tensor out = Tensor::Empty({t, width}, x.dtype());
  for (int64_t r = 0; r < t; ++r) {
    std::memcpy(static_cast<char*>(out.raw_data()) + r * width * es,
                static_cast<const char*>(x.raw_data()) + (r * cols + begin) * es, width * es);
  }
  return out;
}

}  // namespace

absl::Status QkvNormRopeCache(const Tensor& qkv, const Tensor& q_norm, const Tensor& k_norm, float eps,
                              const Tensor& positions, float theta, const Tensor& slot_mapping,
                              const Tensor& k_cache, const Tensor& v_cache, const Tensor& q_out) {
  const int64_t t = q_out.dim(0), hq = q_out.dim(1), d = q_out.dim(2), hk = k_cache.dim(2);
  const DType dt = qkv.dtype();
  SEAM_ASSIGN_OR_RETURN(Tensor q, Columns(qkv, 0, hq * d).Reshape({t * hq, d}));
  SEAM_ASSIGN_OR_RETURN(Tensor k, Columns(qkv, hq * d, hk * d).Reshape({t * hk, d}));
  SEAM_ASSIGN_OR_RETURN(Tensor v, Columns(qkv, (hq + hk) * d, hk * d).Reshape({t, hk, d}));
  Tensor qn = Tensor::Empty({t * hq, d}, q_out.dtype()), kn = Tensor::Empty({t * hk, d}, dt);
  SEAM_RETURN_IF_ERROR(RmsNorm(q, q_norm, eps, qn));
  SEAM_RETURN_IF_ERROR(RmsNorm(k, k_norm, eps, kn));
  SEAM_ASSIGN_OR_RETURN(Tensor q3, qn.Reshape({t, hq, d}));
  SEAM_ASSIGN_OR_RETURN(Tensor k3, kn.Reshape({t, hk, d}));
  SEAM_RETURN_IF_ERROR(RotaryEmbedding(q3, k3, positions, theta, d));
  SEAM_RETURN_IF_ERROR(WriteKvCache(k3, v, slot_mapping, k_cache, v_cache));
  return CopyInto(q3, q_out);
}

}  // namespace seam::kernels::cpu
