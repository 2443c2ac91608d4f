// Threads of the CPU math library (OpenBLAS) behind kernels::Matmul. Its pool
// is shared by the whole process; several CPU ranks (threads or processes)
// on one host should split the cores between them rather than each spinning
// a full pool, which oversubscribes the machine.
#pragma once

namespace seam::kernels {

int CpuMathThreads();
void SetCpuMathThreads(int threads);

// Threads each of `ranks_on_host` CPU ranks should use: max(1, cores / ranks).
int CpuMathThreadsPerRank(int ranks_on_host);

// Sets the pool to CpuMathThreadsPerRank(ranks_on_host) unless the operator
// chose a size with OPENBLAS_NUM_THREADS (then that choice stands).
void ShareCpuMathThreads(int ranks_on_host);

}  // namespace seam::kernels
