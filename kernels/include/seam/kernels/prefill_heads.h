// How many query heads of a GQA group one block of the tensor-core prefill
// attention kernel runs together (each K/V tile then loaded once for all of
// them): a process-wide choice for measuring the kernel's versions against
// each other.
//
// Contract
// - 0 (the default): chosen by the group, 4 where 4 divides it, else 2
//   where 2 does, else 1.
// - 1, 2 or 4: that many where it divides the group, else the default's
//   choice. Outputs are the same either way up to the summation order of
//   the P V products' rounding (each version rounds P the same way; the
//   tests hold every version to the CPU reference).
// - Read at each launch: a CUDA graph keeps the choice it was captured with.
#pragma once

namespace seam::kernels {

// INVALID_ARGUMENT-free by design: values other than 0, 1, 2 and 4 act as 0.
void SetPrefillHeadsPerBlock(int heads);

// The choice as set (default 0).
int PrefillHeadsPerBlock();

}  // namespace seam::kernels
