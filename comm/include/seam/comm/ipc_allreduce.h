// IpcAllReduceFusion: a one-shot all-reduce fused with the residual add and
// RMSNorm, over peer-visible buffers of the ranks of one TP group, for
// decode-sized batches (up to max_tokens rows of bf16, hidden up to 12288).
// Opt-in: nothing creates one unless asked (boundary/ipc_fusion.h offers it
// as an input fusion).
//
// Per call, with partial_r the [T, H] contribution of rank r:
//   x        = bf16( Σ_{r = 0..size-1} float(partial_r) )   (fp32, rank order, rounded once)
//   s        = float(x) + float(residual)                    (fp32)
//   residual ← bf16(s)
//   out      ← bf16( s · (1 / sqrt(mean(s²) + eps)) · float(weight) )
// i.e. exactly Communicator::AllReduce (bf16 summed in fp32 and rounded once)
// followed by kernels::FusedAddRmsNorm, with the sum in rank order so every
// rank gets bit-identical results. The kernel lives with the other kernels
// (seam/kernels/allreduce_norm.h) and takes its norm arithmetic (thread
// layout, reduction order, correctly rounded sqrt and division) from the row
// code FusedAddRmsNorm uses (kernels/cuda/rms_norm_row.cuh); the GPU test
// holds the two to each other bit for bit. This object sets up the peers.
//
// Peers: every rank allocates with cudaMalloc (not the stream-ordered pool)
// two halves of max_tokens × hidden bf16 (used by alternate calls, so one flag
// exchange per call suffices) and a small flag area, and publishes both
// through the Store: as raw device pointers for ranks of the same process
// (which then enable peer access to each other's GPU), and as CUDA IPC
// handles (cudaIpcGetMemHandle) that a rank in another process opens with
// cudaIpcOpenMemHandle. Ranks normally sit on distinct GPUs;
// allow_shared_device lets several ranks share one (a one-GPU test of the
// protocol): their kernels then must be co-resident on that GPU, which holds
// for small grids only, each rank needs its own non-blocking stream, and the
// device's memory pool must not make one rank's stream wait for the other's
// (cudaMemPoolReuseAllowInternalDependencies off), and no rank may copy to
// pageable host memory while its peer may be waiting for its next call (on
// the H200 such a copy waits for the GPU's running kernels, the peer's
// spinning one included); a wait that cannot be met ends at its deadline.
// No multicast objects are created and NCCL is not involved.
//
// Synchronisation: each block of the kernel owns a fixed set of rows and a
// per-block epoch counter kept in device memory (so a captured CUDA graph
// replays correctly); a block publishes its rows and then waits, with a
// deadline, for every peer's block of the same index to publish the same
// epoch. A wait that passes the deadline sets a sticky error flag in mapped
// host memory (read by Failed and CheckError) and the block gives up; the
// object is then unusable.
//
// Contract: every rank calls Run in the same order with the same T and H; a
// call is one kernel on `stream`. Destroy every rank's object (the destructor
// waits for its device and then for every peer to reach its destructor,
// bounded by the timeout) before freeing anything the kernels may touch.
#pragma once

#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "seam/comm/store.h"
#include "seam/core/tensor.h"

namespace seam::comm {

struct IpcAllReduceOptions {
  // Rendezvous deadline, destructor's peer wait, and each in-kernel flag wait.
  absl::Duration timeout = absl::Seconds(30);
  // Lets ranks share a GPU (see above); otherwise such a peer is INVALID_ARGUMENT.
  bool allow_shared_device = false;
};

class IpcAllReduceFusion {
 public:
  static constexpr int kMaxRanks = 8;
  static constexpr int64_t kMaxTokens = 1024;
  static constexpr int64_t kMaxHidden = 12288;  // the fp32 row is staged in 48 KiB of shared memory

  virtual ~IpcAllReduceFusion() = default;

  // `store` must be fresh for this group (keys are written once). `device` is
  // the CUDA ordinal of this rank's GPU. hidden must be a multiple of 8.
  static absl::StatusOr<std::unique_ptr<IpcAllReduceFusion>> Create(std::shared_ptr<Store> store, int rank,
                                                                    int size, int device, int64_t max_tokens,
                                                                    int64_t hidden,
                                                                    IpcAllReduceOptions options = {});

  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual int64_t max_tokens() const = 0;
  virtual int64_t hidden() const = 0;

  // Whether Run accepts these tensors (checks only shapes, dtypes, devices
  // and alignment; touches nothing). A caller may decline on false.
  virtual bool Supports(const Tensor& partial, const Tensor& residual, const Tensor& weight,
                        const Tensor& out) const = 0;

  // partial [T, H] (this rank's contribution; may alias out), residual [T, H]
  // (updated in place), weight [H], out [T, H], all bf16 on this rank's GPU,
  // T ≤ max_tokens, H = hidden. Enqueues one kernel on `stream` (a
  // cudaStream_t) and returns; does not wait.
  virtual absl::Status Run(const Tensor& partial, const Tensor& residual, const Tensor& weight, float eps,
                           const Tensor& out, void* stream) = 0;

  // Waits for the device and reports a flag wait that passed its deadline in
  // any earlier call (DEADLINE_EXCEEDED), or OK.
  virtual absl::Status CheckError() = 0;
  // Whether a kernel that has already finished hit a deadline (no waiting:
  // reads the mapped flag; a call still running is not seen yet).
  virtual bool Failed() const = 0;
};

}  // namespace seam::comm
