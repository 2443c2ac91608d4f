#include "seam/comm/collective_log.h"

#include "collective_checks.h"
#include "seam/core/status.h"

namespace seam::comm {

int64_t CollectiveBytes(const CollectiveRecord& record) {
  if (record.kind == CollectiveKind::kBarrier) return 0;
  return NumElements(record.shape) * static_cast<int64_t>(DTypeSize(record.dtype));
}

void CollectiveLog::Append(const std::string& group, int rank, CollectiveRecord record) {
  std::lock_guard<std::mutex> lock(mu_);
  calls_[{group, rank}].push_back(std::move(record));
}

std::vector<CollectiveRecord> CollectiveLog::Calls(const std::string& group, int rank) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = calls_.find({group, rank});
  return it == calls_.end() ? std::vector<CollectiveRecord>{} : it->second;
}

std::vector<std::string> CollectiveLog::Groups() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> groups;
  for (const auto& [key, calls] : calls_) {
    if (groups.empty() || groups.back() != key.first) groups.push_back(key.first);
  }
  return groups;
}

int64_t CollectiveLog::Bytes(const std::string& group, int rank) const {
  int64_t bytes = 0;
  for (const CollectiveRecord& r : Calls(group, rank)) bytes += CollectiveBytes(r);
  return bytes;
}

void CollectiveLog::Clear() {
  std::lock_guard<std::mutex> lock(mu_);
  calls_.clear();
}

namespace {

class LoggingCommunicator final : public Communicator {
 public:
  LoggingCommunicator(std::unique_ptr<Communicator> inner, std::shared_ptr<CollectiveLog> log)
      : inner_(std::move(inner)), log_(std::move(log)) {}

  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  const std::string& name() const override { return inner_->name(); }

  absl::Status AllReduce(const Tensor& data) override {
    Log(CollectiveKind::kAllReduce, internal::PlanAllReduce(name(), data));
    return inner_->AllReduce(data);
  }
  absl::Status ReduceScatter(const Tensor& input, const Tensor& output) override {
    Log(CollectiveKind::kReduceScatter, internal::PlanReduceScatter(name(), rank(), size(), input, output));
    return inner_->ReduceScatter(input, output);
  }
  absl::Status ReduceScatterV(const Tensor& input, const std::vector<int64_t>& row_counts,
                              const Tensor& output) override {
    Log(CollectiveKind::kReduceScatterV,
        internal::PlanReduceScatterV(name(), rank(), size(), input, row_counts, output));
    return inner_->ReduceScatterV(input, row_counts, output);
  }
  absl::Status AllGather(const Tensor& input, const Tensor& output) override {
    Log(CollectiveKind::kAllGather, internal::PlanAllGather(name(), rank(), size(), input, output));
    return inner_->AllGather(input, output);
  }
  absl::Status AllGatherV(const Tensor& input, const std::vector<int64_t>& row_counts,
                          const Tensor& output) override {
    Log(CollectiveKind::kAllGatherV, internal::PlanAllGatherV(name(), rank(), size(), input, row_counts, output));
    return inner_->AllGatherV(input, row_counts, output);
  }
  absl::Status Broadcast(const Tensor& data, int root) override {
    Log(CollectiveKind::kBroadcast, internal::PlanBroadcast(name(), size(), data, root));
    return inner_->Broadcast(data, root);
  }
  absl::Status Barrier() override {
    Log(CollectiveKind::kBarrier, internal::PlanBarrier(name()));
    return inner_->Barrier();
  }
  absl::Status Synchronize(absl::Time deadline) override { return inner_->Synchronize(deadline); }

 private:
  // A call whose arguments do not validate is logged by kind and group only;
  // the inner backend returns its error.
  void Log(CollectiveKind kind, const absl::StatusOr<internal::CallPlan>& plan) {
    CollectiveRecord record;
    if (plan.ok()) {
      record = plan->record;
    } else {
      record.kind = kind;
      record.group = name();
    }
    log_->Append(name(), rank(), std::move(record));
  }

  std::unique_ptr<Communicator> inner_;
  std::shared_ptr<CollectiveLog> log_;
};

}  // namespace

std::unique_ptr<Communicator> LogCalls(std::unique_ptr<Communicator> inner, std::shared_ptr<CollectiveLog> log) {
  return std::make_unique<LoggingCommunicator>(std::move(inner), std::move(log));
}

CommunicatorFactory MakeLoggedGroupFactory(CommunicatorFactory inner, std::shared_ptr<CollectiveLog> log) {
  return [inner = std::move(inner), log = std::move(log)](
             const std::string& group_name, const std::vector<int>& members,
             int my_index) -> absl::StatusOr<std::unique_ptr<Communicator>> {
    SEAM_ASSIGN_OR_RETURN(std::unique_ptr<Communicator> c, inner(group_name, members, my_index));
    return LogCalls(std::move(c), log);
  };
}

}  // namespace seam::comm
