// The copy + checksum kernel of device handoffs (see device_copy_checksum.h).
#include "src/device_copy_checksum.h"

#include <cuda_runtime.h>

#include "seam/core/cuda_check.h"
#include "src/device_checksum_math.h"

namespace seam::handoff::device {
namespace {

namespace cs = checksum;
constexpr int kThreads = 256;

// The bytes [offset, offset + n) of a span (n ≤ 4) as one zero-padded word,
// copied byte by byte: spans whose pointers are not 16-byte aligned, and tails.
__device__ uint32_t CopyWord(const CopySpan& s, uint64_t offset) {
  const unsigned char* src = static_cast<const unsigned char*>(s.src) + offset;
  unsigned char* dst = s.dst != nullptr ? static_cast<unsigned char*>(s.dst) + offset : nullptr;
  const uint64_t n = s.bytes - offset < 4 ? s.bytes - offset : 4;
  uint32_t word = 0;
  for (uint64_t b = 0; b < n; ++b) {
    const unsigned char c = src[b];
    if (dst != nullptr) dst[b] = c;
    word |= static_cast<uint32_t>(c) << (8 * b);
  }
  return word;
}

__device__ uint64_t WarpSum(uint64_t v) {
  for (int d = 16; d > 0; d /= 2) v = cs::AddMod(v, __shfl_down_sync(0xFFFFFFFFu, v, d));
  return v;
}

__global__ void __launch_bounds__(kThreads) CopyChecksumKernel(CopyChecksumParams p) {
  const uint64_t thread = static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const uint64_t stride = static_cast<uint64_t>(gridDim.x) * blockDim.x;
  uint64_t sum = 0;
  for (int i = 0; i < p.count; ++i) {
    const CopySpan& s = p.spans[i];
    const bool vector = ((reinterpret_cast<uintptr_t>(s.src) | reinterpret_cast<uintptr_t>(s.dst)) & 15) == 0;
    const uint64_t chunks = vector ? s.bytes / 16 : 0;
    const uint4* src = static_cast<const uint4*>(s.src);
    uint4* dst = static_cast<uint4*>(s.dst);
    for (uint64_t c = thread; c < chunks; c += stride) {
      const uint4 v = src[c];
      if (dst != nullptr) dst[c] = v;
      const uint64_t w = s.first_word + 4 * c;
      sum = cs::AddMod(sum, cs::Term(p.seed, w, v.x));
      sum = cs::AddMod(sum, cs::Term(p.seed, w + 1, v.y));
      sum = cs::AddMod(sum, cs::Term(p.seed, w + 2, v.z));
      sum = cs::AddMod(sum, cs::Term(p.seed, w + 3, v.w));
    }
    // What the vectors left: every word of an unaligned span, or the tail.
    for (uint64_t offset = chunks * 16 + 4 * thread; offset < s.bytes; offset += 4 * stride) {
      sum = cs::AddMod(sum, cs::Term(p.seed, s.first_word + offset / 4, CopyWord(s, offset)));
    }
  }
  __shared__ uint64_t warps[kThreads / 32];
  __shared__ bool last;
  sum = WarpSum(sum);
  if (threadIdx.x % 32 == 0) warps[threadIdx.x / 32] = sum;
  // Every thread's copies are visible system-wide before its block counts as arrived.
  __threadfence_system();
  __syncthreads();
  if (threadIdx.x == 0) {
    uint64_t block = 0;
    for (int w = 0; w < kThreads / 32; ++w) block = cs::AddMod(block, warps[w]);
    p.partials[blockIdx.x] = block;
    __threadfence();
    last = atomicAdd(p.arrivals, 1u) == gridDim.x - 1;
  }
  __syncthreads();
  if (!last || threadIdx.x != 0) return;
  __threadfence();
  uint64_t total = 0;
  for (unsigned b = 0; b < gridDim.x; ++b) total = cs::AddMod(total, static_cast<volatile uint64_t*>(p.partials)[b]);
  *p.arrivals = 0;
  if (p.store != nullptr) *static_cast<volatile uint64_t*>(p.store) = total;
  volatile CopyChecksumResult* r = p.result;
  r->checksum = total;
  r->expected = p.expected != nullptr ? *static_cast<const volatile uint64_t*>(p.expected) : 0;
  __threadfence_system();
  r->ticket = p.ticket;
}

__global__ void FlipByteKernel(unsigned char* p) { *p = static_cast<unsigned char>(~*p); }

}  // namespace

absl::Status LaunchCopyChecksum(const CopyChecksumParams& params, void* stream) {
  if (params.count < 0 || params.count > kMaxCopySpans || params.ticket == 0) {
    return absl::InvalidArgumentError("LaunchCopyChecksum: bad span count or zero ticket");
  }
  uint64_t words = 0;
  for (int i = 0; i < params.count; ++i) words += (params.spans[i].bytes + 3) / 4;
  // About eight words a thread, at most kMaxCopyBlocks blocks; one block for nothing.
  const uint64_t blocks = (words + 8 * kThreads - 1) / (8 * kThreads);
  const unsigned grid = static_cast<unsigned>(blocks < 1 ? 1 : blocks > kMaxCopyBlocks ? kMaxCopyBlocks : blocks);
  CopyChecksumKernel<<<grid, kThreads, 0, static_cast<cudaStream_t>(stream)>>>(params);
  return SEAM_CUDA_STATUS(cudaGetLastError());
}

absl::Status LaunchFlipByte(void* p, void* stream) {
  FlipByteKernel<<<1, 1, 0, static_cast<cudaStream_t>(stream)>>>(static_cast<unsigned char*>(p));
  return SEAM_CUDA_STATUS(cudaGetLastError());
}

}  // namespace seam::handoff::device
