// The process-wide choice of seam/kernels/prefill_heads.h; the tensor-core
// prefill attention launcher reads it (kernels/cuda/prefill_attention_mma.cu).
#include "seam/kernels/prefill_heads.h"

#include <atomic>

namespace seam::kernels {
namespace {

std::atomic<int>& Choice() {
  static std::atomic<int> heads{0};
  return heads;
}

}  // namespace

void SetPrefillHeadsPerBlock(int heads) {
  Choice().store(heads == 1 || heads == 2 || heads == 4 ? heads : 0, std::memory_order_relaxed);
}

int PrefillHeadsPerBlock() { return Choice().load(std::memory_order_relaxed); }

}  // namespace seam::kernels
