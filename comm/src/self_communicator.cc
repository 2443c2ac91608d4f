// SelfCommunicator: a group of one rank; every collective is an identity or
// a copy of the input into the output (see seam/comm/self_communicator.h).
#include "seam/comm/self_communicator.h"

#include "collective_checks.h"
#include "seam/core/status.h"

namespace seam::comm {
namespace {

class SelfCommunicator final : public Communicator {
 public:
  explicit SelfCommunicator(std::string name) : name_(std::move(name)) {}

  int rank() const override { return 0; }
  int size() const override { return 1; }
  const std::string& name() const override { return name_; }

  absl::Status AllReduce(const Tensor& data) override { return Ctx(internal::PlanAllReduce(name_, data).status()); }
  absl::Status ReduceScatter(const Tensor& input, const Tensor& output) override {
    SEAM_RETURN_IF_ERROR(Ctx(internal::PlanReduceScatter(name_, 0, 1, input, output).status()));
    return Ctx(CopyInto(input, output));
  }
  absl::Status ReduceScatterV(const Tensor& input, const std::vector<int64_t>& row_counts,
                              const Tensor& output) override {
    SEAM_RETURN_IF_ERROR(Ctx(internal::PlanReduceScatterV(name_, 0, 1, input, row_counts, output).status()));
    return Ctx(CopyInto(input, output));
  }
  absl::Status AllGather(const Tensor& input, const Tensor& output) override {
    SEAM_RETURN_IF_ERROR(Ctx(internal::PlanAllGather(name_, 0, 1, input, output).status()));
    return Ctx(CopyInto(input, output));
  }
  absl::Status AllGatherV(const Tensor& input, const std::vector<int64_t>& row_counts,
                          const Tensor& output) override {
    SEAM_RETURN_IF_ERROR(Ctx(internal::PlanAllGatherV(name_, 0, 1, input, row_counts, output).status()));
    return Ctx(CopyInto(input, output));
  }
  absl::Status Broadcast(const Tensor& data, int root) override {
    return Ctx(internal::PlanBroadcast(name_, 1, data, root).status());
  }
  absl::Status Barrier() override { return absl::OkStatus(); }

 private:
  absl::Status Ctx(const absl::Status& s) const {
    return Annotate(s, internal::GroupContext("self", name_, 0, 1));
  }
  std::string name_;
};

}  // namespace

std::unique_ptr<Communicator> MakeSelfCommunicator(std::string group_name) {
  return std::make_unique<SelfCommunicator>(std::move(group_name));
}

}  // namespace seam::comm
