// The communicator of one rank of a RecordingWorld: validates, logs, meets
// the other ranks in memory and computes this rank's result from every
// rank's deposit (sums in rank order, so all ranks get the same bits).
#include <cstring>

#include "absl/strings/str_cat.h"
#include "collective_checks.h"
#include "host_reduce.h"
#include "recording_state.h"
#include "seam/core/device_memory.h"
#include "seam/core/status.h"

namespace seam::comm {
namespace {

using internal::CallPlan;
using Deposit = RecordingWorld::State::Deposit;

std::vector<char> HostBytes(const Tensor& t) {
  std::vector<char> bytes(t.nbytes());
  if (bytes.empty()) return bytes;
  if (t.device().is_cpu()) {
    std::memcpy(bytes.data(), t.raw_data(), bytes.size());
  } else {
    SEAM_CHECK_OK(DeviceCopy(bytes.data(), Device::CPU(), t.raw_data(), t.device(), bytes.size()));
  }
  return bytes;
}

absl::Status WriteBytes(const void* src, size_t n, const Tensor& dst) {
  if (n == 0) return absl::OkStatus();
  return DeviceCopy(dst.raw_data(), dst.device(), src, Device::CPU(), n);
}

class RecordingCommunicator final : public Communicator {
 public:
  RecordingCommunicator(std::shared_ptr<RecordingWorld::State> state, int rank)
      : state_(std::move(state)), rank_(rank) {}

  int rank() const override { return rank_; }
  int size() const override { return state_->size(); }
  const std::string& name() const override { return state_->name(); }

  absl::Status AllReduce(const Tensor& data) override {
    SEAM_ASSIGN_OR_RETURN(CallPlan plan, Ctx(internal::PlanAllReduce(name(), data)));
    return Run(plan, data, [&](const std::vector<const Deposit*>& all) {
      std::vector<char> sum = Sum(all, data.dtype(), data.numel());
      return WriteBytes(sum.data(), sum.size(), data);
    });
  }
  absl::Status ReduceScatter(const Tensor& input, const Tensor& output) override {
    SEAM_ASSIGN_OR_RETURN(CallPlan plan, Ctx(internal::PlanReduceScatter(name(), rank_, size(), input, output)));
    return Run(plan, input, [&](const std::vector<const Deposit*>& all) { return Slice(plan, all, output); });
  }
  absl::Status ReduceScatterV(const Tensor& input, const std::vector<int64_t>& row_counts,
                              const Tensor& output) override {
    SEAM_ASSIGN_OR_RETURN(CallPlan plan,
                          Ctx(internal::PlanReduceScatterV(name(), rank_, size(), input, row_counts, output)));
    return Run(plan, input, [&](const std::vector<const Deposit*>& all) { return Slice(plan, all, output); });
  }
  absl::Status AllGather(const Tensor& input, const Tensor& output) override {
    SEAM_ASSIGN_OR_RETURN(CallPlan plan, Ctx(internal::PlanAllGather(name(), rank_, size(), input, output)));
    return Run(plan, input, [&](const std::vector<const Deposit*>& all) { return Concat(all, output); });
  }
  absl::Status AllGatherV(const Tensor& input, const std::vector<int64_t>& row_counts,
                          const Tensor& output) override {
    SEAM_ASSIGN_OR_RETURN(CallPlan plan,
                          Ctx(internal::PlanAllGatherV(name(), rank_, size(), input, row_counts, output)));
    return Run(plan, input, [&](const std::vector<const Deposit*>& all) { return Concat(all, output); });
  }
  absl::Status Broadcast(const Tensor& data, int root) override {
    SEAM_ASSIGN_OR_RETURN(CallPlan plan, Ctx(internal::PlanBroadcast(name(), size(), data, root)));
    return Run(plan, data, [&](const std::vector<const Deposit*>& all) {
      return WriteBytes(all[root]->bytes.data(), all[root]->bytes.size(), data);
    });
  }
  absl::Status Barrier() override {
    return Run(internal::PlanBarrier(name()), Tensor(), [](const std::vector<const Deposit*>&) {
      return absl::OkStatus();
    });
  }

 private:
  std::string Context() const { return internal::GroupContext("recording", name(), rank_, size()); }
  absl::StatusOr<CallPlan> Ctx(absl::StatusOr<CallPlan> plan) const {
    if (!plan.ok()) return Annotate(plan.status(), Context());
    return plan;
  }

  // Σ over ranks (in rank order) of the first n elements of every deposit, rounded once to `dtype`.
  static std::vector<char> Sum(const std::vector<const Deposit*>& all, DType dtype, int64_t n) {
    if (n == 0) return {};
    const internal::Accumulator acc = internal::AccumulatorOf(dtype);
    std::vector<int64_t> total((n * internal::AccumulatorSize(acc) + 7) / 8);
    std::vector<int64_t> term(total.size());
    internal::LoadAccumulator(all[0]->bytes.data(), dtype, n, total.data());
    for (size_t r = 1; r < all.size(); ++r) {
      internal::LoadAccumulator(all[r]->bytes.data(), dtype, n, term.data());
      internal::Accumulate(acc, term.data(), n, total.data());
    }
    std::vector<char> out(static_cast<size_t>(n) * DTypeSize(dtype));
    internal::StoreAccumulator(total.data(), dtype, n, out.data());
    return out;
  }

  absl::Status Slice(const CallPlan& plan, const std::vector<const Deposit*>& all, const Tensor& output) const {
    std::vector<char> sum = Sum(all, plan.record.dtype, plan.total_rows * plan.row_numel);
    return WriteBytes(sum.data() + plan.offsets[rank_] * plan.row_bytes, output.nbytes(), output);
  }

  static absl::Status Concat(const std::vector<const Deposit*>& all, const Tensor& output) {
    std::vector<char> out;
    for (const Deposit* d : all) out.insert(out.end(), d->bytes.begin(), d->bytes.end());
    return WriteBytes(out.data(), out.size(), output);
  }

  // Logs the call, meets the other ranks and runs `finish` on every rank's deposit.
  template <typename Finish>
  absl::Status Run(const CallPlan& plan, const Tensor& input, Finish finish) {
    state_->Log(rank_, plan.record);
    const std::string call = plan.record.ToString();
    if (!broken_.ok()) {
      return absl::FailedPreconditionError(absl::StrCat(Context(), ": ", call, " refused: the communicator is broken ",
                                                        "by an earlier failure: ", broken_.ToString()));
    }
    const int64_t seq = next_seq_++;
    std::vector<const Deposit*> all;
    Deposit mine{plan.record, input.defined() ? HostBytes(input) : std::vector<char>()};
    absl::Status met = state_->Meet(rank_, seq, std::move(mine), &all);
    if (!met.ok()) {
      broken_ = Annotate(met, absl::StrCat(Context(), ": ", call));
      return broken_;
    }
    absl::Status result = absl::OkStatus();
    for (int r = 0; r < size() && result.ok(); ++r) {
      if (all[r]->record != plan.record) {
        result = absl::InternalError(absl::StrCat(Context(), ": call #", seq, " ", call, " does not match rank ", r,
                                                  "'s ", all[r]->record.ToString()));
        broken_ = result;
      }
    }
    if (result.ok()) result = finish(all);
    state_->Release(seq);
    return result;
  }

  std::shared_ptr<RecordingWorld::State> state_;
  int rank_;
  int64_t next_seq_ = 0;
  absl::Status broken_;
};

}  // namespace

std::unique_ptr<Communicator> RecordingWorld::MakeCommunicator(int rank) {
  SEAM_CHECK_MSG(rank >= 0 && rank < size(), "recording group '", name(), "': rank ", rank, " of ", size());
  return std::make_unique<RecordingCommunicator>(state_, rank);
}

}  // namespace seam::comm
