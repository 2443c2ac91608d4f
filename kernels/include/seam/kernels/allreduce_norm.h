// The one-shot all-reduce + residual add + RMSNorm kernel over peer-visible
// buffers (CUDA builds only; kernels/cuda/allreduce_norm.cu). comm's
// IpcAllReduceFusion owns the peers (buffers, flag areas, IPC handles,
// deadlines) and calls the launcher; see seam/comm/ipc_allreduce.h for the
// arithmetic and the synchronisation protocol.
#pragma once

#include <cstdint>

#include "absl/status/status.h"

namespace seam::kernels::cuda {

constexpr int kAllReduceNormMaxRanks = 8;
constexpr int64_t kAllReduceNormMaxRows = 1024;  // one row per block, one epoch counter per block
constexpr int kAllReduceNormVec = 8;             // bf16 per 16-byte vector; hidden is a multiple

// The flag area each rank allocates in device memory (zeroed at creation).
struct AllReduceNormFlags {
  unsigned long long flags[kAllReduceNormMaxRanks][kAllReduceNormMaxRows];  // [source rank][block] = last epoch
  unsigned long long epoch[kAllReduceNormMaxRows];  // this rank's per-block call counter
};

// Every rank's buffers as this rank's device sees them.
struct AllReduceNormPeers {
  void* data[kAllReduceNormMaxRanks];  // each rank's bf16 buffer: two halves of half_elems
  AllReduceNormFlags* flags[kAllReduceNormMaxRanks];
};

struct AllReduceNormParams {
  AllReduceNormPeers peers;
  int* error;  // device alias of a mapped host flag, set (sticky) when a wait passes its deadline
  const void* partial;  // bf16 [rows, hidden], this rank's contribution
  void* residual;       // bf16 [rows, hidden], updated in place
  const void* weight;   // bf16 [hidden]
  void* out;            // bf16 [rows, hidden]
  int64_t rows;         // 1 .. kAllReduceNormMaxRows
  int rank;
  int size;
  int hidden;
  int64_t half_elems;  // elements in one half of a rank's buffer
  float eps;
  unsigned long long timeout_ns;  // each flag wait's deadline
};

// Enqueues the kernel (one block per row) on `stream` (a cudaStream_t) of the
// calling thread's current device and returns the launch status.
absl::Status LaunchAllReduceAddRmsNorm(const AllReduceNormParams& p, void* stream);

}  // namespace seam::kernels::cuda
