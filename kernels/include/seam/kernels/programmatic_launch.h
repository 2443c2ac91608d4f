// Programmatic dependent launch (PDL): a process-wide switch for the CUDA
// kernels of the decode path. With it on, an enrolled kernel is launched so
// that it may start while the kernel before it on the stream drains (Hopper
// and later, compute capability >= 9.0); it waits for that kernel's results
// on the device before reading them, so outputs are bit for bit the same
// either way. Only launch latency and ramp-up overlap change.
//
// Contract
// - Default off, opt-in (seam-stage --pdl on): on an H200 it changed decode
//   steps at batch 1-256 by 1 % or less (docs/DECODE_KERNELS.md). It takes
//   effect only on devices of compute capability >= 9.0;
//   elsewhere (and in a build without CUDA) kernels launch plainly whatever
//   the switch says, so setting it is always safe.
// - Read at each kernel launch: a CUDA graph keeps the setting it was captured
//   with. Set it before a model's warm-up and capture, not while another
//   thread launches the same step (a thread-safe atomic, but a step launched
//   half with and half without is only slower, never wrong).
#pragma once

namespace seam::kernels {

// Turns programmatic dependent launch of the enrolled kernels on or off for the process.
void SetProgrammaticLaunch(bool on);

// The switch as set (default false); kernels use it on devices of compute capability >= 9.0 only.
bool ProgrammaticLaunch();

}  // namespace seam::kernels
