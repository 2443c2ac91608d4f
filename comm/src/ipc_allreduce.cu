// IpcAllReduceFusion over peer device pointers of one process's ranks (see
// the header). Memory-ordering argument for one block b of one call, epoch e:
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
#include "seam/comm/ipc_allreduce.h"

#include <unistd.h>

#include <cuda/atomic>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "seam/core/cuda_check.h"
#include "seam/core/status.h"

namespace seam::comm {
namespace {

constexpr int kVec = 8;  // bf16 per 16-byte vector
constexpr int kMaxThreads = 1024;
constexpr int kMaxRanks = IpcAllReduceFusion::kMaxRanks;
constexpr int64_t kMaxBlocks = IpcAllReduceFusion::kMaxTokens;  // one row per block

// The flag area each rank allocates (zeroed at creation).
struct FlagArea {
  unsigned long long flags[kMaxRanks][kMaxBlocks];  // [source rank][block] = last epoch published
  unsigned long long epoch[kMaxBlocks];             // this rank's per-block call counter
};

struct PeerPointers {
  __nv_bfloat16* data[kMaxRanks];  // each rank's buffer (two halves)
  FlagArea* flags[kMaxRanks];
};

struct KernelArgs {
  PeerPointers peers;
  int* error;  // mapped host flag, sticky: a wait passed its deadline
  const __nv_bfloat16* partial;
  __nv_bfloat16* residual;
  const __nv_bfloat16* weight;
  __nv_bfloat16* out;
  int rank;
  int size;
  int hidden;
  int64_t half_elems;  // elements in one half of a rank's buffer
  float eps;
  unsigned long long timeout_ns;
};

union Vec8 {
  uint4 raw;
  __nv_bfloat16 v[kVec];
};

__device__ __forceinline__ unsigned long long GlobalTimerNs() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__device__ __forceinline__ float WarpSum(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

// One row per block (row = blockIdx.x); blockDim.x as kernels/cuda/norm.cu
// picks it for bf16 rows of more than 64 vectors. The fp32 row s is staged in
// dynamic shared memory in norm.cu's vector-major layout.
__global__ void __launch_bounds__(kMaxThreads) OneShotAllReduceAddRmsNormKernel(KernelArgs a) {
  extern __shared__ float s_row[];
  __shared__ float partial_sums[32];
  __shared__ float inv_rms;
  __shared__ unsigned long long epoch_s;
  const int tx = threadIdx.x;
  const int b = blockIdx.x;
  const int64_t base = static_cast<int64_t>(b) * a.hidden;
  const int nvec = a.hidden / kVec;
  FlagArea* own = a.peers.flags[a.rank];

  if (tx == 0) epoch_s = own->epoch[b] + 1;
  __syncthreads();
  const unsigned long long epoch = epoch_s;
  const int64_t half = static_cast<int64_t>(epoch & 1) * a.half_elems;

  // 1. Publish this rank's row.
  __nv_bfloat16* mine = a.peers.data[a.rank] + half + base;
  for (int v = tx; v < nvec; v += blockDim.x) {
    reinterpret_cast<uint4*>(mine)[v] = reinterpret_cast<const uint4*>(a.partial + base)[v];
  }
  __syncthreads();
  if (tx == 0) {
    __threadfence_system();
    for (int p = 0; p < a.size; ++p) {
      cuda::atomic_ref<unsigned long long, cuda::thread_scope_system> slot(a.peers.flags[p]->flags[a.rank][b]);
      slot.store(epoch, cuda::memory_order_release);
    }
    own->epoch[b] = epoch;
  }
  // 2. Wait for every peer's row of this epoch, with a deadline.
  if (tx < a.size) {
    cuda::atomic_ref<unsigned long long, cuda::thread_scope_system> slot(own->flags[tx][b]);
    const unsigned long long start = GlobalTimerNs();
    while (slot.load(cuda::memory_order_acquire) < epoch) {
      if (GlobalTimerNs() - start > a.timeout_ns) {
        cuda::atomic_ref<int, cuda::thread_scope_system> error(*a.error);
        error.store(1, cuda::memory_order_relaxed);
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
      in.raw = __ldcg(reinterpret_cast<const uint4*>(a.peers.data[p] + half + base) + v);
#pragma unroll
      for (int j = 0; j < kVec; ++j) {
        const float f = __bfloat162float(in.v[j]);
        acc[j] = p == 0 ? f : acc[j] + f;
      }
    }
    Vec8 r;
    r.raw = reinterpret_cast<const uint4*>(a.residual + base)[v];
    float s[kVec];
#pragma unroll
    for (int j = 0; j < kVec; ++j) {
      s[j] = __bfloat162float(__float2bfloat16_rn(acc[j]));
      s[j] += __bfloat162float(r.v[j]);
    }
#pragma unroll
    for (int j = 0; j < kVec; ++j) {
      sum_sq += s[j] * s[j];
      s_row[j * nvec + v] = s[j];
    }
  }
  // 4. RMSNorm exactly as kernels/cuda/norm.cu.
  sum_sq = WarpSum(sum_sq);
  const int warps = blockDim.x / 32;
  if (tx % 32 == 0) partial_sums[tx / 32] = sum_sq;
  __syncthreads();
  if (tx == 0) {
    float total = 0.f;
    for (int w = 0; w < warps; ++w) total += partial_sums[w];
    inv_rms = 1.0f / sqrtf(total / static_cast<float>(a.hidden) + a.eps);
  }
  __syncthreads();
  const float inv = inv_rms;
  for (int v = tx; v < nvec; v += blockDim.x) {
    float s[kVec];
#pragma unroll
    for (int j = 0; j < kVec; ++j) s[j] = s_row[j * nvec + v];
    Vec8 res;
#pragma unroll
    for (int j = 0; j < kVec; ++j) res.v[j] = __float2bfloat16_rn(s[j]);
    reinterpret_cast<uint4*>(a.residual + base)[v] = res.raw;
    Vec8 w;
    w.raw = reinterpret_cast<const uint4*>(a.weight)[v];
    Vec8 o;
#pragma unroll
    for (int j = 0; j < kVec; ++j) o.v[j] = __float2bfloat16_rn(s[j] * inv * __bfloat162float(w.v[j]));
    reinterpret_cast<uint4*>(a.out + base)[v] = o.raw;
  }
}

// What one rank publishes through the store: raw pointers for its own
// process, IPC handles for others.
struct Published {
  int64_t pid;
  int32_t device;
  int32_t pad;
  uint64_t data;
  uint64_t flags;
  cudaIpcMemHandle_t data_handle;
  cudaIpcMemHandle_t flags_handle;
};

bool Aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

class IpcAllReduceFusionImpl final : public IpcAllReduceFusion {
 public:
  IpcAllReduceFusionImpl(std::shared_ptr<Store> store, int rank, int size, int device, int64_t max_tokens,
                         int64_t hidden, IpcAllReduceOptions options)
      : store_(std::move(store)), rank_(rank), size_(size), device_(device), max_tokens_(max_tokens),
        hidden_(hidden), options_(options) {}

  ~IpcAllReduceFusionImpl() override {
    cudaSetDevice(device_);
    cudaDeviceSynchronize();
    for (void* p : opened_) cudaIpcCloseMemHandle(p);
    if (joined_) {
      // Free only once every peer has stopped using this rank's buffers. A
      // rank that never launched a kernel does not wait: peers read its rows
      // only after its flag, which only its kernel publishes, so what is left
      // is a peer's flag store into it, made at the start of a call this rank
      // never joined (a group whose ranks already parted ways). This keeps a
      // group that gives up before its first call (see MakeIpcFusionProvider)
      // from waiting out the timeout.
      store_->Set(absl::StrCat("closed/", rank_), {1}).IgnoreError();
      for (int p = 0; ran_ && p < size_; ++p) {
        if (p != rank_) store_->Get(absl::StrCat("closed/", p), options_.timeout).status().IgnoreError();
      }
    }
    if (data_ != nullptr) cudaFree(data_);
    if (flags_ != nullptr) cudaFree(flags_);
    if (error_ != nullptr) cudaFreeHost(error_);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int64_t max_tokens() const override { return max_tokens_; }
  int64_t hidden() const override { return hidden_; }

  absl::Status Init() {
    const std::string ctx = Context();
    SEAM_RETURN_IF_ERROR(Annotate(SEAM_CUDA_STATUS(cudaSetDevice(device_)), ctx));
    const size_t data_bytes = 2 * static_cast<size_t>(max_tokens_ * hidden_) * sizeof(__nv_bfloat16);
    SEAM_RETURN_IF_ERROR(Annotate(SEAM_CUDA_STATUS(cudaMalloc(&data_, data_bytes)), ctx));
    SEAM_RETURN_IF_ERROR(Annotate(SEAM_CUDA_STATUS(cudaMalloc(&flags_, sizeof(FlagArea))), ctx));
    SEAM_RETURN_IF_ERROR(Annotate(SEAM_CUDA_STATUS(cudaMemset(data_, 0, data_bytes)), ctx));
    SEAM_RETURN_IF_ERROR(Annotate(SEAM_CUDA_STATUS(cudaMemset(flags_, 0, sizeof(FlagArea))), ctx));
    SEAM_RETURN_IF_ERROR(
        Annotate(SEAM_CUDA_STATUS(cudaHostAlloc(reinterpret_cast<void**>(&error_), sizeof(int), cudaHostAllocMapped)),
                 ctx));
    *error_ = 0;
    SEAM_RETURN_IF_ERROR(
        Annotate(SEAM_CUDA_STATUS(cudaHostGetDevicePointer(reinterpret_cast<void**>(&error_device_), error_, 0)), ctx));
    SEAM_RETURN_IF_ERROR(Annotate(SEAM_CUDA_STATUS(cudaDeviceSynchronize()), ctx));

    Published mine{};
    mine.pid = static_cast<int64_t>(getpid());
    mine.device = device_;
    mine.data = reinterpret_cast<uint64_t>(data_);
    mine.flags = reinterpret_cast<uint64_t>(flags_);
    SEAM_RETURN_IF_ERROR(Annotate(SEAM_CUDA_STATUS(cudaIpcGetMemHandle(&mine.data_handle, data_)), ctx));
    SEAM_RETURN_IF_ERROR(Annotate(SEAM_CUDA_STATUS(cudaIpcGetMemHandle(&mine.flags_handle, flags_)), ctx));
    std::vector<char> bytes(sizeof(mine));
    std::memcpy(bytes.data(), &mine, sizeof(mine));
    SEAM_RETURN_IF_ERROR(Annotate(store_->Set(absl::StrCat("buffers/", rank_), bytes), ctx + ": rendezvous"));
    joined_ = true;
    peers_.data[rank_] = static_cast<__nv_bfloat16*>(data_);
    peers_.flags[rank_] = flags_;
    for (int p = 0; p < size_; ++p) {
      Published theirs{};
      if (p != rank_) {
        absl::StatusOr<std::vector<char>> got = store_->Get(absl::StrCat("buffers/", p), options_.timeout);
        if (!got.ok()) return Annotate(got.status(), ctx + ": rendezvous");
        if (got->size() != sizeof(theirs)) {
          return absl::InternalError(absl::StrCat(ctx, ": rank ", p, " published ", got->size(), " bytes, expected ",
                                                  sizeof(theirs)));
        }
        std::memcpy(&theirs, got->data(), sizeof(theirs));
        SEAM_RETURN_IF_ERROR(Connect(p, theirs, ctx));
      }
    }
    // norm.cu's per-row thread count: a warp for rows of at most 64 vectors,
    // else the vector count rounded up to warps, at most 1024.
    const int64_t nvec = hidden_ / kVec;
    threads_ = nvec <= 64 ? 32 : static_cast<int>((nvec + 31) / 32 * 32);
    if (threads_ > kMaxThreads) threads_ = kMaxThreads;
    return absl::OkStatus();
  }

  // Makes peer p's buffers visible to this rank: its raw pointers when it
  // lives in this process (with peer access to its GPU), its IPC handles otherwise.
  absl::Status Connect(int p, const Published& theirs, const std::string& ctx) {
    if (theirs.device == device_ && !options_.allow_shared_device) {
      return absl::InvalidArgumentError(absl::StrCat(ctx, ": rank ", p, " uses the same GPU ", device_,
                                                     " (allow_shared_device is off)"));
    }
    if (theirs.pid != static_cast<int64_t>(getpid())) {
      void* data = nullptr;
      void* flags = nullptr;
      SEAM_RETURN_IF_ERROR(Annotate(
          SEAM_CUDA_STATUS(cudaIpcOpenMemHandle(&data, theirs.data_handle, cudaIpcMemLazyEnablePeerAccess)),
          absl::StrCat(ctx, ": opening rank ", p, "'s buffers (pid ", theirs.pid, ")")));
      opened_.push_back(data);
      SEAM_RETURN_IF_ERROR(Annotate(
          SEAM_CUDA_STATUS(cudaIpcOpenMemHandle(&flags, theirs.flags_handle, cudaIpcMemLazyEnablePeerAccess)),
          absl::StrCat(ctx, ": opening rank ", p, "'s flags (pid ", theirs.pid, ")")));
      opened_.push_back(flags);
      peers_.data[p] = static_cast<__nv_bfloat16*>(data);
      peers_.flags[p] = static_cast<FlagArea*>(flags);
      return absl::OkStatus();
    }
    peers_.data[p] = reinterpret_cast<__nv_bfloat16*>(theirs.data);
    peers_.flags[p] = reinterpret_cast<FlagArea*>(theirs.flags);
    if (theirs.device == device_) return absl::OkStatus();
    int can = 0;
    SEAM_RETURN_IF_ERROR(Annotate(SEAM_CUDA_STATUS(cudaDeviceCanAccessPeer(&can, device_, theirs.device)), ctx));
    if (!can) {
      return absl::FailedPreconditionError(
          absl::StrCat(ctx, ": GPU ", device_, " cannot access peer GPU ", theirs.device));
    }
    const cudaError_t e = cudaDeviceEnablePeerAccess(theirs.device, 0);
    if (e == cudaErrorPeerAccessAlreadyEnabled) {
      cudaGetLastError();
      return absl::OkStatus();
    }
    return Annotate(SEAM_CUDA_STATUS(e), ctx);
  }

  bool Supports(const Tensor& partial, const Tensor& residual, const Tensor& weight,
                const Tensor& out) const override {
    return Check(partial, residual, weight, out).ok();
  }

  absl::Status Run(const Tensor& partial, const Tensor& residual, const Tensor& weight, float eps,
                   const Tensor& out, void* stream) override {
    SEAM_RETURN_IF_ERROR(Check(partial, residual, weight, out));
    if (!(eps >= 0.0f)) return absl::InvalidArgumentError(absl::StrCat(Context(), ": eps must be >= 0"));
    const int64_t tokens = partial.dim(0);
    if (tokens == 0) return absl::OkStatus();
    KernelArgs a{};
    a.peers = peers_;
    a.error = error_device_;
    a.partial = static_cast<const __nv_bfloat16*>(partial.raw_data());
    a.residual = static_cast<__nv_bfloat16*>(residual.raw_data());
    a.weight = static_cast<const __nv_bfloat16*>(weight.raw_data());
    a.out = static_cast<__nv_bfloat16*>(out.raw_data());
    a.rank = rank_;
    a.size = size_;
    a.hidden = static_cast<int>(hidden_);
    a.half_elems = max_tokens_ * hidden_;
    a.eps = eps;
    a.timeout_ns = static_cast<unsigned long long>(absl::ToInt64Nanoseconds(options_.timeout));
    const size_t shared = static_cast<size_t>(hidden_) * sizeof(float);
    SEAM_RETURN_IF_ERROR(Annotate(SEAM_CUDA_STATUS(cudaSetDevice(device_)), Context()));
    ran_ = true;
    OneShotAllReduceAddRmsNormKernel<<<static_cast<unsigned int>(tokens), threads_, shared,
                                       static_cast<cudaStream_t>(stream)>>>(a);
    return Annotate(SEAM_CUDA_STATUS(cudaGetLastError()), Context());
  }

  bool Failed() const override {
    return error_ != nullptr && cuda::atomic_ref<int, cuda::thread_scope_system>(*error_).load(
                                    cuda::memory_order_relaxed) != 0;
  }

  absl::Status CheckError() override {
    SEAM_RETURN_IF_ERROR(Annotate(SEAM_CUDA_STATUS(cudaSetDevice(device_)), Context()));
    SEAM_RETURN_IF_ERROR(Annotate(SEAM_CUDA_STATUS(cudaDeviceSynchronize()), Context()));
    if (Failed()) {
      return absl::DeadlineExceededError(absl::StrCat(Context(), ": a peer did not publish its rows within ",
                                                      absl::FormatDuration(options_.timeout),
                                                      "; the results are invalid and the object is unusable"));
    }
    return absl::OkStatus();
  }

 private:
  std::string Context() const { return absl::StrCat("ipc_allreduce rank ", rank_, "/", size_); }

  absl::Status Check(const Tensor& partial, const Tensor& residual, const Tensor& weight, const Tensor& out) const {
    const Device dev = Device::CUDA(device_);
    const Tensor* all[] = {&partial, &residual, &weight, &out};
    for (const Tensor* t : all) {
      if (t->dtype() != DType::kBF16 || t->device() != dev || !Aligned16(t->raw_data())) {
        return absl::InvalidArgumentError(absl::StrCat(Context(), ": expected 16-byte aligned bf16 tensors on cuda:",
                                                       device_, ", got ", t->DebugString()));
      }
    }
    if (partial.rank() != 2 || partial.dim(1) != hidden_ || partial.dim(0) > max_tokens_) {
      return absl::InvalidArgumentError(absl::StrCat(Context(), ": partial must be [T <= ", max_tokens_, ", ",
                                                     hidden_, "], got ", partial.DebugString()));
    }
    if (residual.shape() != partial.shape() || out.shape() != partial.shape() || weight.rank() != 1 ||
        weight.dim(0) != hidden_) {
      return absl::InvalidArgumentError(absl::StrCat(Context(), ": residual/out must match partial and weight be [",
                                                     hidden_, "]"));
    }
    if (out.raw_data() == residual.raw_data() || partial.raw_data() == residual.raw_data()) {
      return absl::InvalidArgumentError(absl::StrCat(Context(), ": residual must not alias partial or out"));
    }
    return absl::OkStatus();
  }

  std::shared_ptr<Store> store_;
  int rank_;
  int size_;
  int device_;
  int64_t max_tokens_;
  int64_t hidden_;
  IpcAllReduceOptions options_;
  void* data_ = nullptr;
  FlagArea* flags_ = nullptr;
  int* error_ = nullptr;         // mapped pinned host memory
  int* error_device_ = nullptr;  // its device alias
  std::vector<void*> opened_;    // peers' IPC mappings, closed before this rank's buffers are freed
  PeerPointers peers_{};
  int threads_ = 32;
  bool joined_ = false;
  bool ran_ = false;  // a kernel was launched
};

}  // namespace

absl::StatusOr<std::unique_ptr<IpcAllReduceFusion>> IpcAllReduceFusion::Create(std::shared_ptr<Store> store,
                                                                               int rank, int size, int device,
                                                                               int64_t max_tokens, int64_t hidden,
                                                                               IpcAllReduceOptions options) {
  const std::string ctx = absl::StrCat("ipc_allreduce rank ", rank, "/", size);
  if (store == nullptr) return absl::InvalidArgumentError(ctx + ": no store");
  if (size < 2 || size > kMaxRanks || rank < 0 || rank >= size) {
    return absl::InvalidArgumentError(absl::StrCat(ctx, ": size must be in [2, ", kMaxRanks, "], rank in [0, size)"));
  }
  if (max_tokens < 1 || max_tokens > kMaxTokens) {
    return absl::InvalidArgumentError(absl::StrCat(ctx, ": max_tokens must be in [1, ", kMaxTokens, "]"));
  }
  if (hidden < kVec || hidden > kMaxHidden || hidden % kVec != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(ctx, ": hidden must be a multiple of ", kVec, " in [", kVec, ", ", kMaxHidden, "]"));
  }
  if (device < 0) return absl::InvalidArgumentError(ctx + ": device must be a CUDA ordinal");
  auto impl = std::make_unique<IpcAllReduceFusionImpl>(std::move(store), rank, size, device, max_tokens, hidden,
                                                       options);
  SEAM_RETURN_IF_ERROR(impl->Init());
  return std::unique_ptr<IpcAllReduceFusion>(std::move(impl));
}

}  // namespace seam::comm
