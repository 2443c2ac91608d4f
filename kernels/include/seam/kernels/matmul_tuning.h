// How Matmul on CUDA chooses its kernel for a problem (M, N, K, dtypes,
// operand alignments): cuBLASLt's heuristic proposes algorithms, and at the
// problem's first occurrence in the process outside a CUDA graph capture the
// candidates are timed once and the fastest is kept for the process's life,
// for every thread on the same kind of GPU (kernels/cuda/matmul.cu says
// which problems take the GEMV kernel instead). A problem first seen inside
// a capture keeps the heuristic's first pick, untimed: warm up before
// capturing (DecodeGraph does). The setting is process-wide and read when a
// thread first meets a problem; decisions are kept per setting, so set it
// once, before the first matmul. Thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "seam/core/dtype.h"

namespace seam::kernels {

struct MatmulTuning {
  // cuBLASLt heuristic results to time (the heuristic's first pick counts as
  // one); split-K variants of the first pick are timed beside them. 1 (the
  // default): the heuristic's first pick, untimed, and no GEMV candidate (the
  // static rule). Autotuning is opt-in because timings differ between
  // processes: two stages of one pipeline may keep different algorithms for
  // one problem and sum in different orders, and a pipeline split is then no
  // longer bitwise equal to no split (seen on an H200: bf16 greedy tokens of
  // `seam serve --pp 2` left those of PP 1).
  int candidates = 1;
  // Timed runs of each candidate after one untimed run; the median counts.
  int timed_runs = 3;
  // Problems with more rows (prefill steps, whose M varies from step to
  // step) keep the heuristic's first pick untimed, so serving never pays a
  // timing per new prompt length above it.
  int64_t max_tuned_rows = 512;
};

// INVALID_ARGUMENT naming the field for candidates outside [1, 64],
// timed_runs outside [1, 100] or a negative max_tuned_rows.
absl::Status SetMatmulTuning(const MatmulTuning& tuning);
MatmulTuning GetMatmulTuning();

// One problem's choice as the calling thread runs it, for benchmarks and reports.
struct MatmulChoice {
  int64_t m = 0, n = 0, k = 0;
  DType x_dtype = DType::kF32, w_dtype = DType::kF32, out_dtype = DType::kF32;
  std::string kernel;     // "gemv", "cublaslt" or "fallback"
  std::string algorithm;  // cuBLASLt: "algo A tile T stages S splitk K ..." (empty otherwise)
  int timed = 0;          // candidates timed (0: chosen without timing)
  int kept = -1;          // index of the kept candidate among them (0: the heuristic's first pick)
  double first_us = 0;    // the heuristic's first pick, median us (0 when untimed)
  double kept_us = 0;     // the kept candidate, median us (0 when untimed)
};

// The calling thread's choices on its current device, in first-seen order.
// Empty in a build without CUDA.
std::vector<MatmulChoice> MatmulChoices();

}  // namespace seam::kernels
