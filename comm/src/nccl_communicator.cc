// NcclCommunicator: the Communicator contract over NCCL. Owns the ncclComm_t
// and an fp32 scratch buffer on the rank's GPU; enqueues on the caller's
// stream, waits with the deadline and aborts the communicator when it passes.
#include "seam/comm/nccl_communicator.h"

#include <cstring>

#include <cuda_runtime_api.h>
#include <nccl.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "collective_checks.h"
#include "nccl_cast.h"
#include "nccl_check.h"
#include "nccl_wait.h"
#include "seam/core/cuda_check.h"
#include "seam/core/status.h"

namespace seam::comm {
namespace {

using internal::CallPlan;

// NCCL type of a reduction carried out directly on the tensor's dtype.
bool NativeType(DType d, ncclDataType_t* t) {
  switch (d) {
    case DType::kF32: *t = ncclFloat32; return true;
    case DType::kI32: *t = ncclInt32; return true;
    case DType::kI64: *t = ncclInt64; return true;
    default: return false;
  }
}

class NcclCommunicatorImpl final : public NcclCommunicator {
 public:
  NcclCommunicatorImpl(std::string name, int rank, int size, NcclOptions options, ncclComm_t comm)
      : name_(std::move(name)), rank_(rank), size_(size), options_(options), comm_(comm) {}
  ~NcclCommunicatorImpl() override {
    if (comm_ != nullptr) {
      cudaSetDevice(options_.device);
      ncclCommFinalize(comm_);
      if (!internal::WaitCommSettled(comm_, absl::Now() + options_.comm.timeout).ok()) {
        ncclCommAbort(comm_);
      } else {
        ncclCommDestroy(comm_);
      }
    }
    if (scratch_ != nullptr) cudaFree(scratch_);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const std::string& name() const override { return name_; }
  void SetStream(void* stream) override { options_.stream = stream; }
  void* stream() const override { return options_.stream; }

  absl::Status AllReduce(const Tensor& data) override {
    SEAM_ASSIGN_OR_RETURN(CallPlan plan, Checked(internal::PlanAllReduce(name_, data), {&data}, true));
    return Guarded(plan, [&]() -> absl::Status {
      return ReduceInto(data.raw_data(), data.dtype(), data.numel(), data.raw_data(), 0, data.numel());
    });
  }

  absl::Status ReduceScatter(const Tensor& input, const Tensor& output) override {
    SEAM_ASSIGN_OR_RETURN(CallPlan plan, Checked(internal::PlanReduceScatter(name_, rank_, size_, input, output),
                                                 {&input, &output}, true));
    return Guarded(plan, [&] { return Slice(plan, input, output); });
  }

  absl::Status ReduceScatterV(const Tensor& input, const std::vector<int64_t>& row_counts,
                              const Tensor& output) override {
    SEAM_ASSIGN_OR_RETURN(CallPlan plan, Checked(internal::PlanReduceScatterV(name_, rank_, size_, input,
                                                                              row_counts, output),
                                                 {&input, &output}, true));
    return Guarded(plan, [&] { return Slice(plan, input, output); });
  }

  absl::Status AllGather(const Tensor& input, const Tensor& output) override {
    SEAM_ASSIGN_OR_RETURN(CallPlan plan, Checked(internal::PlanAllGather(name_, rank_, size_, input, output),
                                                 {&input, &output}, false));
    return Guarded(plan, [&]() -> absl::Status {
      if (input.nbytes() == 0) return absl::OkStatus();
      SEAM_NCCL_RETURN_IF_ERROR(
          ncclAllGather(input.raw_data(), output.raw_data(), input.nbytes(), ncclUint8, comm_, Stream()));
      return absl::OkStatus();
    });
  }

  // Grouped broadcasts, one per rank with rows (zero-row ranks send nothing).
  absl::Status AllGatherV(const Tensor& input, const std::vector<int64_t>& row_counts,
                          const Tensor& output) override {
    SEAM_ASSIGN_OR_RETURN(CallPlan plan, Checked(internal::PlanAllGatherV(name_, rank_, size_, input, row_counts,
                                                                          output),
                                                 {&input, &output}, false));
    return Guarded(plan, [&]() -> absl::Status {
      char* out = static_cast<char*>(output.raw_data());
      SEAM_NCCL_RETURN_IF_ERROR(ncclGroupStart());
      for (int r = 0; r < size_; ++r) {
        const size_t bytes = static_cast<size_t>(plan.counts[r]) * plan.row_bytes;
        if (bytes == 0) continue;
        char* dst = out + plan.offsets[r] * plan.row_bytes;
        const void* src = r == rank_ ? input.raw_data() : dst;
        absl::Status s = SEAM_NCCL_STATUS(ncclBroadcast(src, dst, bytes, ncclUint8, r, comm_, Stream()));
        if (!s.ok()) {
          ncclGroupEnd();
          return s;
        }
      }
      SEAM_NCCL_RETURN_IF_ERROR(ncclGroupEnd());
      return absl::OkStatus();
    });
  }

  absl::Status Broadcast(const Tensor& data, int root) override {
    SEAM_ASSIGN_OR_RETURN(CallPlan plan, Checked(internal::PlanBroadcast(name_, size_, data, root), {&data}, false));
    return Guarded(plan, [&]() -> absl::Status {
      if (data.nbytes() == 0) return absl::OkStatus();
      SEAM_NCCL_RETURN_IF_ERROR(
          ncclBroadcast(data.raw_data(), data.raw_data(), data.nbytes(), ncclUint8, root, comm_, Stream()));
      return absl::OkStatus();
    });
  }

  // A one-element allreduce: returns when every rank has reached it.
  absl::Status Barrier() override {
    return Guarded(internal::PlanBarrier(name_), [&]() -> absl::Status {
      SEAM_RETURN_IF_ERROR(EnsureScratch(sizeof(float)));
      SEAM_NCCL_RETURN_IF_ERROR(ncclAllReduce(scratch_, scratch_, 1, ncclFloat32, ncclSum, comm_, Stream()));
      return absl::OkStatus();
    });
  }

 private:
  cudaStream_t Stream() const { return static_cast<cudaStream_t>(options_.stream); }
  std::string Context() const { return internal::GroupContext("nccl", name_, rank_, size_); }

  absl::StatusOr<CallPlan> Checked(absl::StatusOr<CallPlan> plan, std::initializer_list<const Tensor*> tensors,
                                   bool reduces) {
    if (!plan.ok()) return Annotate(plan.status(), Context());
    const char* call = CollectiveName(plan->record.kind);
    for (const Tensor* t : tensors) {
      if (t->device() != Device::CUDA(options_.device)) {
        return absl::InvalidArgumentError(absl::StrCat(Context(), ": ", call, ": expected tensors on cuda:",
                                                       options_.device, ", got ", t->DebugString()));
      }
    }
    const DType d = plan->record.dtype;
    ncclDataType_t unused;
    if (reduces && !NativeType(d, &unused) && d != DType::kBF16 && d != DType::kF16) {
      return absl::InvalidArgumentError(
          absl::StrCat(Context(), ": ", call, ": NCCL reductions support f32, bf16, f16, i32, i64, not ", DTypeName(d)));
    }
    return plan;
  }

  absl::Status EnsureScratch(size_t bytes) {
    if (bytes <= scratch_bytes_) return absl::OkStatus();
    if (scratch_ != nullptr) {
      SEAM_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(Stream()));
      SEAM_CUDA_RETURN_IF_ERROR(cudaFree(scratch_));
      scratch_ = nullptr;
      scratch_bytes_ = 0;
    }
    SEAM_CUDA_RETURN_IF_ERROR(cudaMalloc(&scratch_, bytes));
    scratch_bytes_ = bytes;
    return absl::OkStatus();
  }

  // Sums n elements at src over the group and writes elements [first, first + count)
  // of the sum to dst (dtype d). Native dtypes reduce out of place into scratch
  // (or straight into dst when it is the whole of src); bf16/f16 go through fp32.
  absl::Status ReduceInto(const void* src, DType d, int64_t n, void* dst, int64_t first, int64_t count) {
    if (n == 0) return absl::OkStatus();
    ncclDataType_t type;
    const size_t es = DTypeSize(d);
    if (NativeType(d, &type)) {
      if (first == 0 && count == n) {
        SEAM_NCCL_RETURN_IF_ERROR(ncclAllReduce(src, dst, n, type, ncclSum, comm_, Stream()));
        return absl::OkStatus();
      }
      SEAM_RETURN_IF_ERROR(EnsureScratch(n * es));
      SEAM_NCCL_RETURN_IF_ERROR(ncclAllReduce(src, scratch_, n, type, ncclSum, comm_, Stream()));
      SEAM_RETURN_IF_ERROR(Enqueued());
      SEAM_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dst, static_cast<char*>(scratch_) + first * es, count * es,
                                                cudaMemcpyDeviceToDevice, Stream()));
      return absl::OkStatus();
    }
    const auto half = d == DType::kBF16 ? internal::Half16::kBF16 : internal::Half16::kF16;
    SEAM_RETURN_IF_ERROR(EnsureScratch(n * sizeof(float)));
    float* acc = static_cast<float*>(scratch_);
    SEAM_CUDA_RETURN_IF_ERROR(internal::LaunchHalfToF32(src, half, acc, n, Stream()));
    SEAM_NCCL_RETURN_IF_ERROR(ncclAllReduce(acc, acc, n, ncclFloat32, ncclSum, comm_, Stream()));
    SEAM_RETURN_IF_ERROR(Enqueued());
    SEAM_CUDA_RETURN_IF_ERROR(internal::LaunchF32ToHalf(acc + first, half, dst, count, Stream()));
    return absl::OkStatus();
  }

  // The communicator is non-blocking: a collective may still be on its way
  // into the stream when its call returns (ncclInProgress). Work that reads
  // its result must be issued only after it is there.
  absl::Status Enqueued() { return internal::WaitCommSettled(comm_, call_deadline_); }

  // Reduce-scatter as allreduce + slice: correct for any row counts, zero included.
  absl::Status Slice(const CallPlan& plan, const Tensor& input, const Tensor& output) {
    return ReduceInto(input.raw_data(), input.dtype(), plan.total_rows * plan.row_numel, output.raw_data(),
                      plan.offsets[rank_] * plan.row_numel, plan.counts[rank_] * plan.row_numel);
  }

  // Enqueues `body` unless broken, then waits for it with the deadline.
  template <typename Body>
  absl::Status Guarded(const CallPlan& plan, Body body) {
    const std::string call = plan.record.ToString();
    if (!broken_.ok()) {
      return absl::FailedPreconditionError(absl::StrCat(Context(), ": ", call, " refused: the communicator is broken ",
                                                        "by an earlier failure: ", broken_.ToString()));
    }
    const absl::Time deadline = absl::Now() + options_.comm.timeout;
    call_deadline_ = deadline;
    absl::Status s = SEAM_CUDA_STATUS(cudaSetDevice(options_.device));
    if (s.ok()) s = body();
    if (s.ok()) s = internal::WaitStreamDone(comm_, Stream(), deadline);
    if (s.ok()) return s;
    if (absl::IsDeadlineExceeded(s)) {
      broken_ = absl::DeadlineExceededError(absl::StrCat(Context(), ": ", call, " did not complete within ",
                                                         absl::FormatDuration(options_.comm.timeout), " (",
                                                         s.message(), "); the communicator was aborted"));
      ncclCommAbort(comm_);
      comm_ = nullptr;
    } else {
      broken_ = Annotate(s, absl::StrCat(Context(), ": ", call));
    }
    return broken_;
  }

  std::string name_;
  int rank_;
  int size_;
  NcclOptions options_;
  ncclComm_t comm_;
  void* scratch_ = nullptr;
  size_t scratch_bytes_ = 0;
  absl::Time call_deadline_ = absl::InfiniteFuture();  // of the collective being issued
  absl::Status broken_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<NcclCommunicator>> MakeNcclCommunicator(std::shared_ptr<Store> store,
                                                                       std::string group_name, int rank,
                                                                       int size, NcclOptions options) {
  const std::string ctx = internal::GroupContext("nccl", group_name, rank, size);
  if (size < 1 || rank < 0 || rank >= size) return absl::InvalidArgumentError(ctx + ": rank must be in [0, size)");
  if (store == nullptr) return absl::InvalidArgumentError(ctx + ": no store");
  const absl::Time deadline = absl::Now() + options.comm.timeout;
  if (options.device < 0) {
    SEAM_RETURN_IF_ERROR(Annotate(SEAM_CUDA_STATUS(cudaGetDevice(&options.device)), ctx));
  }
  SEAM_RETURN_IF_ERROR(Annotate(SEAM_CUDA_STATUS(cudaSetDevice(options.device)), ctx));

  ncclUniqueId id;
  const std::string key = "nccl_unique_id";
  if (rank == 0) {
    SEAM_RETURN_IF_ERROR(Annotate(SEAM_NCCL_STATUS(ncclGetUniqueId(&id)), ctx));
    std::vector<char> bytes(reinterpret_cast<const char*>(&id), reinterpret_cast<const char*>(&id) + sizeof(id));
    SEAM_RETURN_IF_ERROR(Annotate(store->Set(key, bytes), ctx + ": rendezvous failed"));
  } else {
    absl::StatusOr<std::vector<char>> bytes = store->Get(key, options.comm.timeout);
    if (!bytes.ok()) return Annotate(bytes.status(), ctx + ": rendezvous failed");
    if (bytes->size() != sizeof(id)) {
      return absl::InternalError(absl::StrCat(ctx, ": store key '", key, "' holds ", bytes->size(),
                                              " bytes, expected ", sizeof(id)));
    }
    std::memcpy(&id, bytes->data(), sizeof(id));
  }

  // Non-blocking initialisation, so a rank that never joins costs one deadline, not a hang.
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t comm = nullptr;
  absl::Status s = SEAM_NCCL_STATUS(ncclCommInitRankConfig(&comm, size, id, rank, &config));
  if (s.ok()) s = internal::WaitCommSettled(comm, deadline);
  if (!s.ok()) {
    if (comm != nullptr) ncclCommAbort(comm);
    if (absl::IsDeadlineExceeded(s)) {
      return absl::DeadlineExceededError(absl::StrCat(ctx, ": ncclCommInitRankConfig did not complete within ",
                                                      absl::FormatDuration(options.comm.timeout)));
    }
    return Annotate(s, ctx + ": initialisation failed");
  }
  return std::unique_ptr<NcclCommunicator>(
      std::make_unique<NcclCommunicatorImpl>(std::move(group_name), rank, size, options, comm));
}

}  // namespace seam::comm
