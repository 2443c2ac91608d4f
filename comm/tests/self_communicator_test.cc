// SelfCommunicator: identities and copies for a group of one, validated like
// every other backend.
#include "comm_test_util.h"
#include "seam/comm/self_communicator.h"
#include "seam/core/tensor.h"

namespace seam::comm {
namespace {

using ::testing::HasSubstr;

TEST(SelfCommunicatorTest, CollectivesAreIdentitiesOrCopies) {
  auto self = MakeSelfCommunicator("attn_tp.dp1");
  EXPECT_EQ(self->rank(), 0);
  EXPECT_EQ(self->size(), 1);
  EXPECT_EQ(self->name(), "attn_tp.dp1");
  Tensor data = Tensor::FromFloats({1.5f, -2, 3, 4}, {2, 2}, DType::kBF16);
  EXPECT_TRUE(self->AllReduce(data).ok());
  EXPECT_EQ(data.ToFloats(), (std::vector<float>{1.5f, -2, 3, 4}));
  Tensor out = Tensor::Zeros({2, 2}, DType::kBF16);
  EXPECT_TRUE(self->AllGatherV(data, {2}, out).ok());
  EXPECT_EQ(out.ToFloats(), data.ToFloats());
  Tensor out2 = Tensor::Zeros({2, 2}, DType::kBF16);
  EXPECT_TRUE(self->ReduceScatter(data, out2).ok());
  EXPECT_EQ(out2.ToFloats(), data.ToFloats());
  EXPECT_TRUE(self->Broadcast(data, 0).ok());
  EXPECT_TRUE(self->Barrier().ok());
}

TEST(SelfCommunicatorTest, SynchronizeHasNothingToWaitFor) {
  auto self = MakeSelfCommunicator("tp");
  Tensor data = Tensor::FromFloats({1, 2}, {2});
  EXPECT_TRUE(self->AllReduce(data).ok());
  EXPECT_TRUE(self->Synchronize(absl::InfinitePast()).ok());
  EXPECT_EQ(data.ToFloats(), (std::vector<float>{1, 2}));
}

TEST(SelfCommunicatorTest, ArgumentErrorsNameTheGroupAndCall) {
  auto self = MakeSelfCommunicator("tp");
  absl::Status s = self->Broadcast(Tensor::Zeros({2}, DType::kF32), 1);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "self group 'tp' rank 0/1: Broadcast: root 1 is not a rank of a group of 1");
  s = self->AllGatherV(Tensor::Zeros({2, 3}, DType::kF32), {2}, Tensor::Zeros({2, 4}, DType::kF32));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("AllGatherV: input [2, 3] and output [2, 4] differ beyond dim 0"));
  s = self->ReduceScatterV(Tensor::Zeros({2, 3}, DType::kF32), {2, 0}, Tensor::Zeros({2, 3}, DType::kF32));
  EXPECT_THAT(std::string(s.message()), HasSubstr("row_counts has 2 entries, the group has 1 ranks"));
  s = self->AllGather(Tensor::Zeros({2, 3}, DType::kF32), Tensor::Zeros({2, 3}, DType::kBF16));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("AllGather: output: expected dtype f32, got bf16"));
}

}  // namespace
}  // namespace seam::comm
