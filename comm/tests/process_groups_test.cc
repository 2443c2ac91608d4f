// ProcessGroups: group membership and rank facts from the topology, size-one
// groups without the factory, topology validation, and real collectives
// through the recording and Gloo factories.
#include <map>
#include <mutex>

#include "comm_test_util.h"
#include "seam/comm/process_groups.h"
#include "seam/core/status.h"
#include "seam/core/tensor.h"

namespace seam::comm {
namespace {

using testing::RunRanks;

TEST(ProcessGroupsTest, MembershipForTp4AttnDp2) {
  const Topology t{4, 2, 1};
  EXPECT_EQ(ProcessGroups::AttnTpMembers(t, 0), (std::vector<int>{0, 1}));
  EXPECT_EQ(ProcessGroups::AttnTpMembers(t, 1), (std::vector<int>{2, 3}));
  EXPECT_EQ(ProcessGroups::AttnDpMembers(t, 0), (std::vector<int>{0, 2}));
  EXPECT_EQ(ProcessGroups::AttnDpMembers(t, 1), (std::vector<int>{1, 3}));

  auto registry = std::make_shared<RecordingRegistry>();
  CommunicatorFactory recording = MakeRecordingGroupFactory(registry);
  std::mutex mu;
  std::vector<std::string> calls;
  CommunicatorFactory factory = [&](const std::string& name, const std::vector<int>& members, int my_index) {
    {
      std::lock_guard<std::mutex> lock(mu);
      std::string call = name + " [";
      for (int m : members) call += std::to_string(m) + (m == members.back() ? "" : ",");
      calls.push_back(call + "] #" + std::to_string(my_index));
    }
    return recording(name, members, my_index);
  };
  std::vector<std::unique_ptr<ProcessGroups>> groups(4);
  RunRanks(4, [&](int r) {
    auto g = ProcessGroups::Create(t, r, factory);
    ASSERT_TRUE(g.ok()) << g.status();
    groups[r] = std::move(g).value();
  });
  const ProcessGroups& g3 = *groups[3];
  EXPECT_EQ(g3.tp_rank(), 3);
  EXPECT_EQ(g3.dp_rank(), 1);
  EXPECT_EQ(g3.attn_tp_rank(), 1);
  EXPECT_EQ(g3.attn_tp_size(), 2);
  EXPECT_EQ(g3.tp().name(), "tp");
  EXPECT_EQ(g3.tp().rank(), 3);
  EXPECT_EQ(g3.attn_tp().name(), "attn_tp.dp1");
  EXPECT_EQ(g3.attn_tp().rank(), 1);
  EXPECT_EQ(g3.attn_dp().name(), "attn_dp.r1");
  EXPECT_EQ(g3.attn_dp().rank(), 1);
  std::sort(calls.begin(), calls.end());
  EXPECT_EQ(calls, (std::vector<std::string>{"attn_dp.r0 [0,2] #0", "attn_dp.r0 [0,2] #1", "attn_dp.r1 [1,3] #0",
                                             "attn_dp.r1 [1,3] #1", "attn_tp.dp0 [0,1] #0", "attn_tp.dp0 [0,1] #1",
                                             "attn_tp.dp1 [2,3] #0", "attn_tp.dp1 [2,3] #1", "tp [0,1,2,3] #0",
                                             "tp [0,1,2,3] #1", "tp [0,1,2,3] #2", "tp [0,1,2,3] #3"}));

  // An all-reduce in each attention group sums exactly its members' tp ranks.
  std::vector<Tensor> tp(4), attn_tp(4), attn_dp(4);
  RunRanks(4, [&](int r) {
    tp[r] = Tensor::FromFloats({float(r)}, {1});
    attn_tp[r] = Tensor::FromFloats({float(r)}, {1});
    attn_dp[r] = Tensor::FromFloats({float(r)}, {1});
    EXPECT_TRUE(groups[r]->tp().AllReduce(tp[r]).ok());
    EXPECT_TRUE(groups[r]->attn_tp().AllReduce(attn_tp[r]).ok());
    EXPECT_TRUE(groups[r]->attn_dp().AllReduce(attn_dp[r]).ok());
  });
  const std::vector<float> attn_tp_sums = {1, 1, 5, 5}, attn_dp_sums = {2, 4, 2, 4};
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(tp[r].FlatAt(0), 6.0f);
    EXPECT_EQ(attn_tp[r].FlatAt(0), attn_tp_sums[r]) << "rank " << r;
    EXPECT_EQ(attn_dp[r].FlatAt(0), attn_dp_sums[r]) << "rank " << r;
  }
  EXPECT_TRUE(registry->ExpectSameSequenceInEveryGroup().ok());
}

TEST(ProcessGroupsTest, SizeOneGroupsAreSelfAndFullGroupsShareTheTpCommunicator) {
  std::vector<std::string> calls;
  std::mutex mu;
  auto registry = std::make_shared<RecordingRegistry>();
  CommunicatorFactory recording = MakeRecordingGroupFactory(registry);
  CommunicatorFactory factory = [&](const std::string& name, const std::vector<int>& members, int my_index) {
    std::lock_guard<std::mutex> lock(mu);
    calls.push_back(name);
    return recording(name, members, my_index);
  };
  std::vector<std::unique_ptr<ProcessGroups>> groups(2);
  RunRanks(2, [&](int r) { groups[r] = std::move(ProcessGroups::Create(Topology{2, 2, 1}, r, factory)).value(); });
  EXPECT_EQ(calls, (std::vector<std::string>{"tp", "tp"}));
  EXPECT_EQ(groups[1]->attn_tp().name(), "attn_tp.dp1");
  EXPECT_EQ(groups[1]->attn_tp().size(), 1);
  EXPECT_EQ(&groups[1]->attn_dp(), &groups[1]->tp());

  auto single = ProcessGroups::Create(Topology{1, 1, 2}, 0, factory);
  ASSERT_TRUE(single.ok());
  EXPECT_EQ((*single)->tp().size(), 1);
  EXPECT_EQ(calls.size(), 2u);
}

// Forwards every collective to `inner`; Synchronize notes the group's name
// and returns what `failures` holds for it (OK when absent).
class SyncProbe final : public Communicator {
 public:
  SyncProbe(std::unique_ptr<Communicator> inner, std::vector<std::string>* synced,
            const std::map<std::string, absl::Status>* failures)
      : inner_(std::move(inner)), synced_(synced), failures_(failures) {}
  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  const std::string& name() const override { return inner_->name(); }
  absl::Status AllReduce(const Tensor& d) override { return inner_->AllReduce(d); }
  absl::Status ReduceScatter(const Tensor& i, const Tensor& o) override { return inner_->ReduceScatter(i, o); }
  absl::Status ReduceScatterV(const Tensor& i, const std::vector<int64_t>& c, const Tensor& o) override {
    return inner_->ReduceScatterV(i, c, o);
  }
  absl::Status AllGather(const Tensor& i, const Tensor& o) override { return inner_->AllGather(i, o); }
  absl::Status AllGatherV(const Tensor& i, const std::vector<int64_t>& c, const Tensor& o) override {
    return inner_->AllGatherV(i, c, o);
  }
  absl::Status Broadcast(const Tensor& d, int root) override { return inner_->Broadcast(d, root); }
  absl::Status Barrier() override { return inner_->Barrier(); }
  absl::Status Synchronize(absl::Time deadline) override {
    synced_->push_back(name());
    auto it = failures_->find(name());
    return it == failures_->end() ? inner_->Synchronize(deadline) : it->second;
  }

 private:
  std::unique_ptr<Communicator> inner_;
  std::vector<std::string>* synced_;
  const std::map<std::string, absl::Status>* failures_;
};

TEST(ProcessGroupsTest, SynchronizeReachesEachDistinctGroupOnceAndStopsAtTheFirstError) {
  std::vector<std::string> synced;
  std::map<std::string, absl::Status> failures;
  // Recording groups (one registry per topology) meet only when a collective
  // is issued, so one rank can be built alone.
  auto probed = [&](CommunicatorFactory recording) -> CommunicatorFactory {
    return [&, recording](const std::string& name, const std::vector<int>& members,
                          int my_index) -> absl::StatusOr<std::unique_ptr<Communicator>> {
      SEAM_ASSIGN_OR_RETURN(std::unique_ptr<Communicator> inner, recording(name, members, my_index));
      return std::unique_ptr<Communicator>(std::make_unique<SyncProbe>(std::move(inner), &synced, &failures));
    };
  };
  auto all = ProcessGroups::Create(Topology{4, 2, 1}, 2,
                                   probed(MakeRecordingGroupFactory(std::make_shared<RecordingRegistry>())));
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_TRUE((*all)->Synchronize(absl::Now() + absl::Seconds(1)).ok());
  EXPECT_EQ(synced, (std::vector<std::string>{"tp", "attn_tp.dp1", "attn_dp.r0"}));

  synced.clear();
  failures["attn_tp.dp1"] = absl::DeadlineExceededError("attn_tp.dp1 did not complete");
  absl::Status s = (*all)->Synchronize(absl::Now() + absl::Seconds(1));
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(s.message(), "attn_tp.dp1 did not complete");
  EXPECT_EQ(synced, (std::vector<std::string>{"tp", "attn_tp.dp1"}));

  // tp=2, attn_dp=2: attn_tp is a group of one (self), attn_dp is the TP communicator.
  synced.clear();
  auto shared = ProcessGroups::Create(Topology{2, 2, 1}, 0,
                                      probed(MakeRecordingGroupFactory(std::make_shared<RecordingRegistry>())));
  ASSERT_TRUE(shared.ok()) << shared.status();
  EXPECT_TRUE((*shared)->Synchronize(absl::InfinitePast()).ok());
  EXPECT_EQ(synced, (std::vector<std::string>{"tp"}));
}

TEST(ProcessGroupsTest, InvalidTopologyNamesTheSizes) {
  auto factory = MakeRecordingGroupFactory(std::make_shared<RecordingRegistry>());
  auto g = ProcessGroups::Create(Topology{4, 3, 1}, 0, factory);
  EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(g.status().message(),
            "invalid topology tp=4 attn_dp=3 pp=1: tp must be divisible by attn_dp (4 % 3 = 1)");
  g = ProcessGroups::Create(Topology{0, 1, 1}, 0, factory);
  EXPECT_EQ(g.status().message(), "invalid topology tp=0 attn_dp=1 pp=1: every size must be at least 1");
  g = ProcessGroups::Create(Topology{2, 1, 1}, 2, factory);
  EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(g.status().message(), "tp rank 2 is outside [0, 2)");
}

TEST(ProcessGroupsTest, GlooFactoryConnectsEveryGroupThroughItsOwnPrefix) {
  testing::TempDir dir;
  auto store = MakeFileStore(dir.path());
  ASSERT_TRUE(store.ok());
  CommOptions options;
  options.timeout = absl::Seconds(10);
  CommunicatorFactory factory = MakeGlooGroupFactory(*store, options);
  std::vector<Tensor> attn_dp(4);
  RunRanks(4, [&](int r) {
    auto g = ProcessGroups::Create(Topology{4, 2, 1}, r, factory);
    ASSERT_TRUE(g.ok()) << g.status();
    attn_dp[r] = Tensor::FromFloats({float(r), 1.0f}, {1, 2});
    EXPECT_TRUE((*g)->attn_dp().AllReduce(attn_dp[r]).ok());
    EXPECT_TRUE((*g)->tp().Barrier().ok());
  });
  const std::vector<float> sums = {2, 4, 2, 4};
  for (int r = 0; r < 4; ++r) EXPECT_EQ(attn_dp[r].ToFloats(), (std::vector<float>{sums[r], 2.0f})) << "rank " << r;
}

}  // namespace
}  // namespace seam::comm
