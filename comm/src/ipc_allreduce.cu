// IpcAllReduceFusion over peer device pointers of one process's ranks (see
// the header): the peer setup (buffers, flag areas, IPC handle exchange,
// peer access, deadlines and teardown). The kernel and its memory-ordering
// argument live in kernels/cuda/allreduce_norm.cu (seam/kernels/allreduce_norm.h).
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
#include "seam/kernels/allreduce_norm.h"

namespace seam::comm {
namespace {

using kernels::cuda::AllReduceNormFlags;
using kernels::cuda::AllReduceNormParams;
using kernels::cuda::AllReduceNormPeers;

constexpr int kVec = kernels::cuda::kAllReduceNormVec;  // bf16 per 16-byte vector
constexpr int kMaxRanks = IpcAllReduceFusion::kMaxRanks;
static_assert(kMaxRanks == kernels::cuda::kAllReduceNormMaxRanks, "the kernel's flag area holds every rank");
static_assert(IpcAllReduceFusion::kMaxTokens == kernels::cuda::kAllReduceNormMaxRows,
              "the kernel keeps one epoch per row");

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
    SEAM_RETURN_IF_ERROR(Annotate(SEAM_CUDA_STATUS(cudaMalloc(&flags_, sizeof(AllReduceNormFlags))), ctx));
    SEAM_RETURN_IF_ERROR(Annotate(SEAM_CUDA_STATUS(cudaMemset(data_, 0, data_bytes)), ctx));
    SEAM_RETURN_IF_ERROR(Annotate(SEAM_CUDA_STATUS(cudaMemset(flags_, 0, sizeof(AllReduceNormFlags))), ctx));
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
    peers_.data[rank_] = data_;
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
      peers_.data[p] = data;
      peers_.flags[p] = static_cast<AllReduceNormFlags*>(flags);
      return absl::OkStatus();
    }
    peers_.data[p] = reinterpret_cast<void*>(theirs.data);
    peers_.flags[p] = reinterpret_cast<AllReduceNormFlags*>(theirs.flags);
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
    AllReduceNormParams a{};
    a.peers = peers_;
    a.error = error_device_;
    a.partial = partial.raw_data();
    a.residual = residual.raw_data();
    a.weight = weight.raw_data();
    a.out = out.raw_data();
    a.rows = tokens;
    a.rank = rank_;
    a.size = size_;
    a.hidden = static_cast<int>(hidden_);
    a.half_elems = max_tokens_ * hidden_;
    a.eps = eps;
    a.timeout_ns = static_cast<unsigned long long>(absl::ToInt64Nanoseconds(options_.timeout));
    SEAM_RETURN_IF_ERROR(Annotate(SEAM_CUDA_STATUS(cudaSetDevice(device_)), Context()));
    ran_ = true;
    return Annotate(kernels::cuda::LaunchAllReduceAddRmsNorm(a, stream), Context());
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
  AllReduceNormFlags* flags_ = nullptr;
  int* error_ = nullptr;         // mapped pinned host memory
  int* error_device_ = nullptr;  // its device alias
  std::vector<void*> opened_;    // peers' IPC mappings, closed before this rank's buffers are freed
  AllReduceNormPeers peers_{};
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
