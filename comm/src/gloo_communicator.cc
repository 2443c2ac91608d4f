// GlooCommunicator: the Communicator contract over Gloo's TCP transport.
// Owns one Gloo context (and its TCP device) per group; every call converts
// Gloo's exceptions into Status and breaks the communicator on failure.
#include "seam/comm/gloo_communicator.h"

#include <cstring>
#include <exception>

#include <gloo/allgatherv.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/common/error.h>
#include <gloo/common/logging.h>
#include <gloo/rendezvous/context.h>
#include <gloo/transport/tcp/device.h>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "collective_checks.h"
#include "gloo_reducer.h"
#include "gloo_store_adapter.h"
#include "seam/core/status.h"

namespace seam::comm {
namespace {

using internal::CallPlan;

// Gloo reports timeouts as "Read timeout", "Write timeout" or "Timed out waiting ...".
bool IsTimeoutMessage(const std::string& what) {
  const std::string lower = absl::AsciiStrToLower(what);
  return absl::StrContains(lower, "timeout") || absl::StrContains(lower, "timed out");
}

class GlooCommunicator final : public Communicator {
 public:
  GlooCommunicator(std::string name, int rank, int size, CommOptions options,
                   std::shared_ptr<gloo::Context> context)
      : name_(std::move(name)), rank_(rank), size_(size), options_(options), context_(std::move(context)),
        reducer_(context_) {}

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const std::string& name() const override { return name_; }

  absl::Status AllReduce(const Tensor& data) override {
    SEAM_ASSIGN_OR_RETURN(CallPlan plan, Checked(internal::PlanAllReduce(name_, data), {&data}));
    return Guarded(plan, [&] {
      if (data.numel() == 0) return;
      const void* sum = reducer_.Sum(data.raw_data(), data.dtype(), data.numel());
      internal::StoreAccumulator(sum, data.dtype(), data.numel(), data.raw_data());
    });
  }

  absl::Status ReduceScatter(const Tensor& input, const Tensor& output) override {
    SEAM_ASSIGN_OR_RETURN(CallPlan plan,
                          Checked(internal::PlanReduceScatter(name_, rank_, size_, input, output), {&input, &output}));
    return Guarded(plan, [&] { ReduceAndSlice(plan, input, output); });
  }

  absl::Status ReduceScatterV(const Tensor& input, const std::vector<int64_t>& row_counts,
                              const Tensor& output) override {
    SEAM_ASSIGN_OR_RETURN(CallPlan plan, Checked(internal::PlanReduceScatterV(name_, rank_, size_, input,
                                                                              row_counts, output),
                                                 {&input, &output}));
    return Guarded(plan, [&] { ReduceAndSlice(plan, input, output); });
  }

  absl::Status AllGather(const Tensor& input, const Tensor& output) override {
    SEAM_ASSIGN_OR_RETURN(CallPlan plan,
                          Checked(internal::PlanAllGather(name_, rank_, size_, input, output), {&input, &output}));
    return Guarded(plan, [&] { Gather(plan, input, output); });
  }

  absl::Status AllGatherV(const Tensor& input, const std::vector<int64_t>& row_counts,
                          const Tensor& output) override {
    SEAM_ASSIGN_OR_RETURN(CallPlan plan, Checked(internal::PlanAllGatherV(name_, rank_, size_, input, row_counts,
                                                                          output),
                                                 {&input, &output}));
    return Guarded(plan, [&] { Gather(plan, input, output); });
  }

  absl::Status Broadcast(const Tensor& data, int root) override {
    SEAM_ASSIGN_OR_RETURN(CallPlan plan, Checked(internal::PlanBroadcast(name_, size_, data, root), {&data}));
    return Guarded(plan, [&] {
      if (data.nbytes() == 0 || size_ == 1) return;
      gloo::BroadcastOptions opts(context_);
      opts.setOutput<uint8_t>(static_cast<uint8_t*>(data.raw_data()), data.nbytes());
      opts.setRoot(root);
      gloo::broadcast(opts);
    });
  }

  absl::Status Barrier() override {
    return Guarded(internal::PlanBarrier(name_), [&] {
      if (size_ == 1) return;
      gloo::BarrierOptions opts(context_);
      gloo::barrier(opts);
    });
  }

 private:
  // Adds the group context to a validation error and requires host tensors.
  absl::StatusOr<CallPlan> Checked(absl::StatusOr<CallPlan> plan, std::initializer_list<const Tensor*> tensors) {
    const std::string ctx = internal::GroupContext("gloo", name_, rank_, size_);
    if (!plan.ok()) return Annotate(plan.status(), ctx);
    for (const Tensor* t : tensors) {
      if (!t->device().is_cpu()) {
        return absl::InvalidArgumentError(absl::StrCat(ctx, ": ", CollectiveName(plan->record.kind),
                                                       ": gloo needs host tensors, got ", t->DebugString()));
      }
    }
    return plan;
  }

  // Sums the whole input into scratch, then copies this rank's rows out
  // (reduce-scatter as allreduce + slice: correct for any counts, including zero).
  void ReduceAndSlice(const CallPlan& plan, const Tensor& input, const Tensor& output) {
    const int64_t n = plan.total_rows * plan.row_numel;
    if (n == 0) return;
    const void* sum = reducer_.Sum(input.raw_data(), input.dtype(), n);
    const size_t es = internal::AccumulatorSize(internal::AccumulatorOf(input.dtype()));
    const char* mine = static_cast<const char*>(sum) + plan.offsets[rank_] * plan.row_numel * es;
    internal::StoreAccumulator(mine, output.dtype(), plan.counts[rank_] * plan.row_numel, output.raw_data());
  }

  void Gather(const CallPlan& plan, const Tensor& input, const Tensor& output) {
    if (plan.total_rows * plan.row_bytes == 0) return;
    uint8_t* out = static_cast<uint8_t*>(output.raw_data());
    if (input.nbytes() > 0) std::memmove(out + plan.offsets[rank_] * plan.row_bytes, input.raw_data(), input.nbytes());
    if (size_ == 1) return;
    std::vector<size_t> bytes(plan.counts.size());
    for (size_t r = 0; r < bytes.size(); ++r) bytes[r] = static_cast<size_t>(plan.counts[r]) * plan.row_bytes;
    gloo::AllgathervOptions opts(context_);
    opts.setOutput<uint8_t>(out, bytes);  // no input: this rank's slice is already in place
    gloo::allgatherv(opts);
  }

  // Runs `body` unless the communicator is broken; converts and remembers failures.
  template <typename Body>
  absl::Status Guarded(const CallPlan& plan, Body body) {
    const std::string call = plan.record.ToString();
    const std::string ctx = internal::GroupContext("gloo", name_, rank_, size_);
    if (!broken_.ok()) {
      return absl::FailedPreconditionError(absl::StrCat(ctx, ": ", call, " refused: the communicator is broken by an ",
                                                        "earlier failure: ", broken_.ToString()));
    }
    try {
      body();
      return absl::OkStatus();
    } catch (const gloo::IoException& e) {
      if (IsTimeoutMessage(e.what())) {
        broken_ = absl::DeadlineExceededError(absl::StrCat(ctx, ": ", call, " did not complete within ",
                                                           absl::FormatDuration(options_.timeout), ": ", e.what()));
      } else {
        broken_ = absl::UnavailableError(absl::StrCat(ctx, ": ", call, " lost its connection to a peer: ", e.what()));
      }
    } catch (const gloo::EnforceNotMet& e) {
      broken_ = absl::InternalError(absl::StrCat(ctx, ": ", call, " failed inside gloo: ", e.what()));
    } catch (const std::exception& e) {
      broken_ = absl::InternalError(absl::StrCat(ctx, ": ", call, " failed: ", e.what()));
    } catch (...) {
      broken_ = absl::InternalError(absl::StrCat(ctx, ": ", call, " failed with an unknown exception"));
    }
    return broken_;
  }

  std::string name_;
  int rank_;
  int size_;
  CommOptions options_;
  std::shared_ptr<gloo::Context> context_;
  internal::GlooReducer reducer_;
  absl::Status broken_;  // first failure; OK while usable
};

}  // namespace

absl::StatusOr<std::unique_ptr<Communicator>> MakeGlooCommunicator(std::shared_ptr<Store> store,
                                                                   std::string group_name, int rank, int size,
                                                                   CommOptions options,
                                                                   GlooTransportOptions transport) {
  const std::string ctx = internal::GroupContext("gloo", group_name, rank, size);
  if (size < 1 || rank < 0 || rank >= size) {
    return absl::InvalidArgumentError(absl::StrCat(ctx, ": rank must be in [0, size)"));
  }
  if (store == nullptr) return absl::InvalidArgumentError(absl::StrCat(ctx, ": no store"));
  gloo::transport::tcp::attr attr;
  if (!transport.interface.empty()) {
    attr.iface = transport.interface;
  } else {
    attr.hostname = transport.hostname;
  }
  std::shared_ptr<gloo::transport::Device> device;
  try {
    device = gloo::transport::tcp::CreateDevice(attr);
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(ctx, ": cannot create a TCP device on ",
                                                   transport.interface.empty() ? "host '" + transport.hostname
                                                                               : "interface '" + transport.interface,
                                                   "': ", e.what()));
  }
  auto context = std::make_shared<gloo::rendezvous::Context>(rank, size);
  context->setTimeout(absl::ToChronoMilliseconds(options.timeout));
  internal::GlooStoreAdapter adapter(std::move(store), options.timeout);
  try {
    context->connectFullMesh(adapter, device);
  } catch (const internal::StoreFailure& e) {
    return Annotate(e.status(), absl::StrCat(ctx, ": rendezvous failed"));
  } catch (const gloo::IoException& e) {
    const std::string msg = absl::StrCat(ctx, ": rendezvous failed: ", e.what());
    return IsTimeoutMessage(e.what()) ? absl::DeadlineExceededError(msg) : absl::UnavailableError(msg);
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat(ctx, ": rendezvous failed: ", e.what()));
  }
  auto comm = std::make_unique<GlooCommunicator>(std::move(group_name), rank, size, options, std::move(context));
  // connectFullMesh returns on a rank once its own pairs are up; a peer may
  // still be finishing its side. A barrier here makes creation complete on
  // every rank before any of them can use or tear down the group.
  absl::Status ready = comm->Barrier();
  if (!ready.ok()) return Annotate(ready, absl::StrCat(ctx, ": rendezvous barrier failed"));
  return std::unique_ptr<Communicator>(std::move(comm));
}

}  // namespace seam::comm
