// The process-wide switch of seam/kernels/programmatic_launch.h; the CUDA
// launchers read it (kernels/cuda/pdl_launch.cuh).
#include "seam/kernels/programmatic_launch.h"

#include <atomic>

namespace seam::kernels {
namespace {

std::atomic<bool>& Switch() {
  static std::atomic<bool> on{false};  // see the header's contract
  return on;
}

}  // namespace

void SetProgrammaticLaunch(bool on) { Switch().store(on, std::memory_order_relaxed); }

bool ProgrammaticLaunch() { return Switch().load(std::memory_order_relaxed); }

}  // namespace seam::kernels
