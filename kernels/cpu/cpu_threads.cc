// OpenBLAS thread-pool sizing for processes that run several CPU ranks.
#include "seam/kernels/cpu_threads.h"

#include <cblas.h>

#include <algorithm>
#include <cstdlib>
#include <thread>

namespace seam::kernels {

int CpuMathThreads() { return openblas_get_num_threads(); }

void SetCpuMathThreads(int threads) { openblas_set_num_threads(std::max(1, threads)); }

int CpuMathThreadsPerRank(int ranks_on_host) {
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return std::max(1, cores / std::max(1, ranks_on_host));
}

void ShareCpuMathThreads(int ranks_on_host) {
  if (std::getenv("OPENBLAS_NUM_THREADS") != nullptr) return;
  SetCpuMathThreads(CpuMathThreadsPerRank(ranks_on_host));
}

}  // namespace seam::kernels
