// The one-shot all-reduce + add + RMSNorm kernel of seam/kernels/allreduce_norm.h
// (comm/src/ipc_allreduce.cu sets up the peers). Memory-ordering argument for
// one block b of one call, epoch e:
//
//  1. Publish. Every thread of block b stores its share of this rank's rows
//     into this rank's own buffer half (e mod 2). __syncthreads() orders those
//     stores before thread 0's next operations at block scope; thread 0 then
//     executes __threadfence_system() (fence.sc.sys, cumulative over what the
//     block made visible to it) and stores e into slot [rank][b] of every
//     peer's flag area with a system-scope release store.
//  2. Wait. Thread p < size polls slot [p][b] of this rank's own flag area
//     with system-scope acquire loads until it reads e (or the deadline
//     passes). The acquire synchronises with peer p's release, so peer p's
//     row stores happen-before it; the following __syncthreads() extends that
//     to every thread of the block. Peer rows are then read with ld.global.cg
//     (L2, never a stale L1 line).
//  3. Reuse. Peer p writes half (e mod 2) again only at epoch e + 2, and its
//     block b reaches epoch e + 2 only after it saw this rank's flag e + 1,
//     which this rank's block b stores only in the next call's kernel, i.e.
//     after this kernel (and its reads of half e mod 2) completed in stream
//     order. So one flag exchange per call is enough.
//  Epochs live in device memory per block index (all ranks run the same
//  sequence of T, so block b's counter agrees across ranks), which keeps a
//  captured CUDA graph correct on replay.
//
// The norm is rms_norm_row.cuh's, as FusedAddRmsNorm (norm.cu) computes it.
#include <cuda/atomic>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "rms_norm_row.cuh"
#include "seam/core/cuda_check.h"
#include "seam/kernels/allreduce_norm.h"

namespace seam::kernels::cuda {
namespace {

constexpr int kVec = kAllReduceNormVec;

union Vec8 {
  uint4 raw;
  __nv_bfloat16 v[kVec];
};

__device__ __forceinline__ unsigned long long GlobalTimerNs() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// One row per block (row = blockIdx.x), RmsNormRowThreads threads. The fp32
// row s is staged in dynamic shared memory (vector-major, see StageVector).
__global__ void __launch_bounds__(kRmsNormMaxThreadsPerRow) OneShotAllReduceAddRmsNormKernel(AllReduceNormParams a) {
  extern __shared__ float s_row[];
  __shared__ float partial_sums[32];
  __shared__ float inv_rms;
  __shared__ unsigned long long epoch_s;
  const int tx = threadIdx.x;
  const int b = blockIdx.x;
  const int64_t base = static_cast<int64_t>(b) * a.hidden;
  const int nvec = a.hidden / kVec;
  AllReduceNormFlags* own = a.peers.flags[a.rank];

  if (tx == 0) epoch_s = own->epoch[b] + 1;
  __syncthreads();
  const unsigned long long epoch = epoch_s;
  const int64_t half = static_cast<int64_t>(epoch & 1) * a.half_elems;
  const auto* partial = static_cast<const __nv_bfloat16*>(a.partial);
  auto* residual = static_cast<__nv_bfloat16*>(a.residual);
  const auto* weight = static_cast<const __nv_bfloat16*>(a.weight);
  auto* out = static_cast<__nv_bfloat16*>(a.out);

  // 1. Publish this rank's row.
  __nv_bfloat16* mine = static_cast<__nv_bfloat16*>(a.peers.data[a.rank]) + half + base;
  for (int v = tx; v < nvec; v += blockDim.x) {
    reinterpret_cast<uint4*>(mine)[v] = reinterpret_cast<const uint4*>(partial + base)[v];
  }
  __syncthreads();
  if (tx == 0) {
    __threadfence_system();
    for (int p = 0; p < a.size; ++p) {
      ::cuda::atomic_ref<unsigned long long, ::cuda::thread_scope_system> slot(a.peers.flags[p]->flags[a.rank][b]);
      slot.store(epoch, ::cuda::memory_order_release);
    }
    own->epoch[b] = epoch;
  }
  // 2. Wait for every peer's row of this epoch, with a deadline.
  if (tx < a.size) {
    ::cuda::atomic_ref<unsigned long long, ::cuda::thread_scope_system> slot(own->flags[tx][b]);
    const unsigned long long start = GlobalTimerNs();
    while (slot.load(::cuda::memory_order_acquire) < epoch) {
      if (GlobalTimerNs() - start > a.timeout_ns) {
        ::cuda::atomic_ref<int, ::cuda::thread_scope_system> error(*a.error);
        error.store(1, ::cuda::memory_order_relaxed);
        break;
      }
      __nanosleep(64);
    }
  }
  __syncthreads();

  // 3. Sum in rank order, round once (the all-reduced x), add the residual.
  float sum_sq = 0.f;
  for (int v = tx; v < nvec; v += blockDim.x) {
    float acc[kVec];
    for (int p = 0; p < a.size; ++p) {
      Vec8 in;
      const auto* theirs = static_cast<const __nv_bfloat16*>(a.peers.data[p]) + half + base;
      in.raw = __ldcg(reinterpret_cast<const uint4*>(theirs) + v);
#pragma unroll
      for (int j = 0; j < kVec; ++j) {
        const float f = __bfloat162float(in.v[j]);
        acc[j] = p == 0 ? f : acc[j] + f;
      }
    }
    Vec8 r;
    r.raw = reinterpret_cast<const uint4*>(residual + base)[v];
    float s[kVec];
#pragma unroll
    for (int j = 0; j < kVec; ++j) {
      s[j] = __bfloat162float(__float2bfloat16_rn(acc[j]));
      s[j] += __bfloat162float(r.v[j]);
    }
    AddSquares(s, sum_sq);
    StageVector(s_row, nvec, v, s);
  }
  // 4. RMSNorm exactly as FusedAddRmsNorm.
  const float inv = RowInvRms(sum_sq, a.hidden, a.eps, partial_sums, &inv_rms);
  for (int v = tx; v < nvec; v += blockDim.x) {
    float s[kVec];
    UnstageVector(s_row, nvec, v, s);
    Vec8 res;
#pragma unroll
    for (int j = 0; j < kVec; ++j) res.v[j] = __float2bfloat16_rn(s[j]);
    reinterpret_cast<uint4*>(residual + base)[v] = res.raw;
    Vec8 w;
    w.raw = reinterpret_cast<const uint4*>(weight)[v];
    float wf[kVec];
#pragma unroll
    for (int j = 0; j < kVec; ++j) wf[j] = __bfloat162float(w.v[j]);
    float o[kVec];
    NormalizeVector(s, inv, wf, o);
    Vec8 ob;
#pragma unroll
    for (int j = 0; j < kVec; ++j) ob.v[j] = __float2bfloat16_rn(o[j]);
    reinterpret_cast<uint4*>(out + base)[v] = ob.raw;
  }
}

}  // namespace

absl::Status LaunchAllReduceAddRmsNorm(const AllReduceNormParams& p, void* stream) {
  const int threads = RmsNormRowThreads(p.hidden / kVec);
  const size_t shared = static_cast<size_t>(p.hidden) * sizeof(float);
  OneShotAllReduceAddRmsNormKernel<<<static_cast<unsigned int>(p.rows), threads, shared,
                                     static_cast<cudaStream_t>(stream)>>>(p);
  return SEAM_CUDA_STATUS(cudaGetLastError());
}

}  // namespace seam::kernels::cuda
