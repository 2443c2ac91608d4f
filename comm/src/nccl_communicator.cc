// NcclCommunicator: the Communicator contract over NCCL. Owns the ncclComm_t
// and the scratch buffers on the rank's GPU; enqueues on the caller's stream
// and returns; Synchronize waits for the stream with the deadline and aborts
// the communicator when it passes.
#include "seam/comm/nccl_communicator.h"

#include <algorithm>
#include <cstring>
#include <vector>

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

// Issues an NCCL call of NcclCommunicatorImpl, noting ncclInProgress (see Issued).
#define SEAM_NCCL_ISSUE(call) SEAM_RETURN_IF_ERROR(Issued((call), #call, __FILE__, __LINE__))

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

// Scratch bytes ReduceInto needs to sum n elements of dtype d and keep all of
// them (whole) or a part.
size_t ReduceScratch(DType d, int64_t n, bool whole) {
  ncclDataType_t unused;
  if (n == 0) return 0;
  if (NativeType(d, &unused)) return whole ? 0 : static_cast<size_t>(n) * DTypeSize(d);
  return static_cast<size_t>(n) * sizeof(float);
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
    for (void* p : retired_scratch_) cudaFree(p);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const std::string& name() const override { return name_; }
  void SetStream(void* stream) override { options_.stream = stream; }
  void* stream() const override { return options_.stream; }

  absl::Status AllReduce(const Tensor& data) override {
    SEAM_ASSIGN_OR_RETURN(CallPlan plan, Checked(internal::PlanAllReduce(name_, data), {&data}, true));
    return Guarded(plan, ReduceScratch(data.dtype(), data.numel(), true), [&]() -> absl::Status {
      return ReduceInto(data.raw_data(), data.dtype(), data.numel(), data.raw_data(), 0, data.numel());
    });
  }

  absl::Status ReduceScatter(const Tensor& input, const Tensor& output) override {
    SEAM_ASSIGN_OR_RETURN(CallPlan plan, Checked(internal::PlanReduceScatter(name_, rank_, size_, input, output),
                                                 {&input, &output}, true));
    return Guarded(plan, SliceScratch(plan), [&] { return Slice(plan, input, output); });
  }

  absl::Status ReduceScatterV(const Tensor& input, const std::vector<int64_t>& row_counts,
                              const Tensor& output) override {
    SEAM_ASSIGN_OR_RETURN(CallPlan plan, Checked(internal::PlanReduceScatterV(name_, rank_, size_, input,
                                                                              row_counts, output),
                                                 {&input, &output}, true));
    return Guarded(plan, SliceScratch(plan), [&] { return Slice(plan, input, output); });
  }

  absl::Status AllGather(const Tensor& input, const Tensor& output) override {
    SEAM_ASSIGN_OR_RETURN(CallPlan plan, Checked(internal::PlanAllGather(name_, rank_, size_, input, output),
                                                 {&input, &output}, false));
    return Guarded(plan, 0, [&]() -> absl::Status {
      if (input.nbytes() == 0) return absl::OkStatus();
      SEAM_NCCL_ISSUE(
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
    return Guarded(plan, 0, [&]() -> absl::Status {
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
      SEAM_NCCL_ISSUE(ncclGroupEnd());
      return absl::OkStatus();
    });
  }

  absl::Status Broadcast(const Tensor& data, int root) override {
    SEAM_ASSIGN_OR_RETURN(CallPlan plan, Checked(internal::PlanBroadcast(name_, size_, data, root), {&data}, false));
    return Guarded(plan, 0, [&]() -> absl::Status {
      if (data.nbytes() == 0) return absl::OkStatus();
      SEAM_NCCL_ISSUE(
          ncclBroadcast(data.raw_data(), data.raw_data(), data.nbytes(), ncclUint8, root, comm_, Stream()));
      return absl::OkStatus();
    });
  }

  // A one-element allreduce: the stream passes it when every rank has reached it.
  absl::Status Barrier() override {
    return Guarded(internal::PlanBarrier(name_), sizeof(float), [&]() -> absl::Status {
      SEAM_NCCL_ISSUE(ncclAllReduce(scratch_, scratch_, 1, ncclFloat32, ncclSum, comm_, Stream()));
      return absl::OkStatus();
    });
  }

  // Waits for the current stream and every other stream a call was enqueued
  // on since the last Synchronize. Refused during a capture: a graph cannot
  // wait for the host, and the stream holds nothing to wait for until the
  // graph is launched.
  absl::Status Synchronize(absl::Time deadline) override {
    if (!broken_.ok()) return Refused("Synchronize");
    const absl::Time start = absl::Now();
    SEAM_RETURN_IF_ERROR(Annotate(SEAM_CUDA_STATUS(cudaSetDevice(options_.device)), Context()));
    if (std::find(unsynced_.begin(), unsynced_.end(), Stream()) == unsynced_.end()) unsynced_.push_back(Stream());
    for (cudaStream_t stream : unsynced_) {
      bool capturing = false;
      SEAM_RETURN_IF_ERROR(Annotate(Capturing(stream, &capturing), Context() + ": Synchronize"));
      if (capturing) {
        return absl::FailedPreconditionError(absl::StrCat(
            Context(), ": Synchronize: a stream of this communicator is being captured into a CUDA graph; ",
            "synchronize after launching the graph"));
      }
    }
    for (cudaStream_t stream : unsynced_) {
      absl::Status s = internal::WaitStreamDone(comm_, stream, deadline);
      if (!s.ok()) {
        const std::string what = unsynced_calls_ == 0
                                     ? std::string("Synchronize")
                                     : absl::StrCat("Synchronize of ", unsynced_calls_, " enqueued call(s), the last ",
                                                    last_call_.ToString(), ",");
        return Break(s, what, deadline - start);
      }
    }
    unsynced_.clear();
    unsynced_calls_ = 0;
    return absl::OkStatus();
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

  static absl::Status Capturing(cudaStream_t stream, bool* capturing) {
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    SEAM_CUDA_RETURN_IF_ERROR(cudaStreamIsCapturing(stream, &status));
    *capturing = status != cudaStreamCaptureStatusNone;
    return absl::OkStatus();
  }

  // Grows the scratch to at least `bytes` (at least doubling it). The old
  // buffer may still be read by enqueued work or by a captured graph, so it
  // is kept until the communicator goes; doubling bounds what is kept by the
  // size of the live buffer. No allocation while the stream is captured.
  absl::Status EnsureScratch(size_t bytes, bool capturing) {
    if (bytes <= scratch_bytes_) return absl::OkStatus();
    if (capturing) {
      return absl::FailedPreconditionError(absl::StrCat(
          "needs ", bytes, " bytes of scratch, more than the ", scratch_bytes_, " allocated, while its stream is ",
          "being captured into a CUDA graph (no allocation during a capture); issue the call once before capturing"));
    }
    const size_t grown = std::max(bytes, 2 * scratch_bytes_);
    void* fresh = nullptr;
    SEAM_CUDA_RETURN_IF_ERROR(cudaMalloc(&fresh, grown));
    if (scratch_ != nullptr) retired_scratch_.push_back(scratch_);
    scratch_ = fresh;
    scratch_bytes_ = grown;
    return absl::OkStatus();
  }

  // Sums n elements at src over the group and writes elements [first, first + count)
  // of the sum to dst (dtype d). Native dtypes reduce out of place into scratch
  // (or straight into dst when it is the whole of src); bf16/f16 go through fp32.
  // The scratch (ReduceScratch bytes) is already there.
  absl::Status ReduceInto(const void* src, DType d, int64_t n, void* dst, int64_t first, int64_t count) {
    if (n == 0) return absl::OkStatus();
    SEAM_CHECK(scratch_bytes_ >= ReduceScratch(d, n, first == 0 && count == n));
    ncclDataType_t type;
    const size_t es = DTypeSize(d);
    if (NativeType(d, &type)) {
      if (first == 0 && count == n) {
        SEAM_NCCL_ISSUE(ncclAllReduce(src, dst, n, type, ncclSum, comm_, Stream()));
        return absl::OkStatus();
      }
      SEAM_NCCL_ISSUE(ncclAllReduce(src, scratch_, n, type, ncclSum, comm_, Stream()));
      SEAM_RETURN_IF_ERROR(Enqueued());
      SEAM_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dst, static_cast<char*>(scratch_) + first * es, count * es,
                                                cudaMemcpyDeviceToDevice, Stream()));
      return absl::OkStatus();
    }
    const auto half = d == DType::kBF16 ? internal::Half16::kBF16 : internal::Half16::kF16;
    float* acc = static_cast<float*>(scratch_);
    SEAM_CUDA_RETURN_IF_ERROR(internal::LaunchHalfToF32(src, half, acc, n, Stream()));
    SEAM_NCCL_ISSUE(ncclAllReduce(acc, acc, n, ncclFloat32, ncclSum, comm_, Stream()));
    SEAM_RETURN_IF_ERROR(Enqueued());
    SEAM_CUDA_RETURN_IF_ERROR(internal::LaunchF32ToHalf(acc + first, half, dst, count, Stream()));
    return absl::OkStatus();
  }

  // A call of the non-blocking communicator that returns ncclInProgress is
  // still being enqueued, by NCCL's own thread; Enqueued waits for it.
  absl::Status Issued(ncclResult_t r, const char* call, const char* file, int line) {
    return internal::NcclStatus(r, call, file, line);
  }

  // Work that reads a collective's result must be issued only after the
  // collective is in the stream: waits (host only) until NCCL is done
  // enqueueing. A non-blocking communicator answers ncclInProgress during a
  // capture too (measured on H200s with NCCL 2.2x, after a warm-up of the
  // same call): NCCL's own thread then enqueues the collective on the
  // capturing stream, which records it whatever thread issues it, and this
  // wait returns only once it is there, before the capture can end.
  absl::Status Enqueued() {
    return internal::WaitCommSettled(comm_, call_deadline_);
  }

  // Reduce-scatter as allreduce + slice: correct for any row counts, zero included.
  size_t SliceScratch(const CallPlan& plan) const {
    const int64_t n = plan.total_rows * plan.row_numel;
    return ReduceScratch(plan.record.dtype, n, plan.offsets[rank_] == 0 && plan.counts[rank_] == plan.total_rows);
  }
  absl::Status Slice(const CallPlan& plan, const Tensor& input, const Tensor& output) {
    return ReduceInto(input.raw_data(), input.dtype(), plan.total_rows * plan.row_numel, output.raw_data(),
                      plan.offsets[rank_] * plan.row_numel, plan.counts[rank_] * plan.row_numel);
  }

  absl::Status Refused(const std::string& call) const {
    return absl::FailedPreconditionError(absl::StrCat(Context(), ": ", call, " refused: the communicator is broken ",
                                                      "by an earlier failure: ", broken_.ToString()));
  }

  // Breaks the communicator with `s`, the failure of `what`; a missed
  // deadline (`limit` after the start) also aborts it.
  absl::Status Break(const absl::Status& s, const std::string& what, absl::Duration limit) {
    if (absl::IsDeadlineExceeded(s)) {
      broken_ = absl::DeadlineExceededError(absl::StrCat(Context(), ": ", what, " did not complete within ",
                                                         absl::FormatDuration(limit), " (", s.message(),
                                                         "); the communicator was aborted"));
      ncclCommAbort(comm_);
      comm_ = nullptr;
    } else {
      broken_ = Annotate(s, absl::StrCat(Context(), ": ", what));
    }
    return broken_;
  }

  // Enqueues `body` unless broken and returns once NCCL has put it in the
  // stream; nothing waits for the GPU. `scratch` bytes are ensured first (a
  // failure there enqueued nothing and does not break the communicator).
  template <typename Body>
  absl::Status Guarded(const CallPlan& plan, size_t scratch, Body body) {
    if (!broken_.ok()) return Refused(plan.record.ToString());
    call_deadline_ = absl::Now() + options_.comm.timeout;
    absl::Status s = SEAM_CUDA_STATUS(cudaSetDevice(options_.device));
    if (s.ok()) s = Capturing(Stream(), &capturing_);
    if (s.ok()) s = EnsureScratch(scratch, capturing_);
    if (!s.ok()) return Annotate(s, absl::StrCat(Context(), ": ", plan.record.ToString()));
    s = body();
    if (s.ok()) s = Enqueued();
    if (!s.ok()) return Break(s, plan.record.ToString(), options_.comm.timeout);
    last_call_ = plan.record;
    ++unsynced_calls_;
    if (std::find(unsynced_.begin(), unsynced_.end(), Stream()) == unsynced_.end()) unsynced_.push_back(Stream());
    return absl::OkStatus();
  }

  std::string name_;
  int rank_;
  int size_;
  NcclOptions options_;
  ncclComm_t comm_;
  void* scratch_ = nullptr;
  size_t scratch_bytes_ = 0;
  std::vector<void*> retired_scratch_;  // outgrown scratch buffers, freed with the communicator
  absl::Time call_deadline_ = absl::InfiniteFuture();  // of the collective being issued
  bool capturing_ = false;   // its stream is being captured into a CUDA graph
  std::vector<cudaStream_t> unsynced_;  // streams with calls enqueued since the last Synchronize
  int64_t unsynced_calls_ = 0;
  CollectiveRecord last_call_;  // the latest call enqueued (named when Synchronize fails)
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
