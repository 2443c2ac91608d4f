// Argument validation of the ops: each bad argument gives INVALID_ARGUMENT
// with a message naming it and its sizes; mixed devices are rejected, and
// device tensors of an op with no CUDA kernel get UNIMPLEMENTED.
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "seam/kernels/ops.h"
#include "tests/reference.h"

namespace seam::kernels {
namespace {

using testing::RandomTensor;

void ExpectInvalid(const absl::Status& s, const std::string& message) {
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_EQ(s.message(), message);
}

TEST(Validation, MatmulNamesTheMismatchedArgumentAndSizes) {
  const Tensor x = RandomTensor({7, 96}, DType::kF32, 1);
  const Tensor out = Tensor::Empty({7, 33}, DType::kF32);
  ExpectInvalid(Matmul(x, RandomTensor({33, 95}, DType::kF32, 2), out),
                "w: expected dim 1 of size 96, got shape [33, 95]");
  ExpectInvalid(Matmul(x, RandomTensor({32, 96}, DType::kF32, 3), out), "out: expected shape [7, 32], got [7, 33]");
  ExpectInvalid(Matmul(Tensor::Empty({7, 96}, DType::kI32), x, out), "x: expected dtype f32, bf16 or f16, got i32");
  ExpectInvalid(Matmul(x.Narrow(1, 0, 48), x, out),
                "x: expected a contiguous tensor, got a strided view f32[7, 48] cpu");
  ExpectInvalid(Matmul(Tensor(), x, out), "x: tensor is undefined");
}

TEST(Validation, NormsCheckWeightEpsAndAliasing) {
  const Tensor x = RandomTensor({7, 96}, DType::kBF16, 4);
  const Tensor residual = RandomTensor({7, 96}, DType::kBF16, 5);
  const Tensor w = RandomTensor({96}, DType::kBF16, 6);
  ExpectInvalid(RmsNorm(x, RandomTensor({95}, DType::kBF16, 7), 1e-6f, x), "weight: expected shape [96], got [95]");
  ExpectInvalid(RmsNorm(x, w, -1.0f, x), "eps: expected a finite value >= 0, got -1");
  ExpectInvalid(FusedAddRmsNorm(x, residual.Rows(0, 6), w, 1e-6f, x),
                "residual: expected shape [7, 96], got [6, 96]");
  ExpectInvalid(FusedAddRmsNorm(x, residual, w, 1e-6f, residual), "out: must not alias residual (it may alias x)");
}

TEST(Validation, ElementwiseOpsCheckShapesAndIndexDtypes) {
  ExpectInvalid(SiluAndMul(RandomTensor({7, 95}, DType::kF32, 8), Tensor::Empty({7, 47}, DType::kF32)),
                "input: expected an even number of columns [gate | up], got shape [7, 95]");
  ExpectInvalid(SiluAndMul(RandomTensor({7, 96}, DType::kF32, 9), Tensor::Empty({7, 96}, DType::kF32)),
                "out: expected shape [7, 48], got [7, 96]");
  ExpectInvalid(AddInPlace(Tensor::Empty({7, 96}, DType::kF32), Tensor::Empty({96, 7}, DType::kF32)),
                "dst shape [7, 96] does not match src shape [96, 7]");
  const Tensor table = RandomTensor({20, 96}, DType::kF32, 10);
  ExpectInvalid(Embedding(Tensor::Empty({7}, DType::kF32), table, 0, Tensor::Empty({7, 96}, DType::kF32)),
                "ids: expected dtype i32, got f32");
  ExpectInvalid(Embedding(Tensor::FromInts({1}, {1}), table, -3, Tensor::Empty({1, 96}, DType::kF32)),
                "vocab_start: expected >= 0, got -3");
}

TEST(Validation, RotaryChecksHeadsPositionsAndRotaryDim) {
  const Tensor q = RandomTensor({7, 6, 64}, DType::kBF16, 11);
  const Tensor k = RandomTensor({7, 2, 64}, DType::kBF16, 12);
  const Tensor pos = Tensor::FromInts({0, 1, 2, 3, 4, 5, 6}, {7});
  ExpectInvalid(RotaryEmbedding(q, k, pos, 10000.0f, 63), "rotary_dim: expected an even value in [2, head_dim 64], got 63");
  ExpectInvalid(RotaryEmbedding(q, k, pos, 10000.0f, 66), "rotary_dim: expected an even value in [2, head_dim 64], got 66");
  ExpectInvalid(RotaryEmbedding(q, RandomTensor({7, 2, 80}, DType::kBF16, 13), pos, 10000.0f, 64),
                "k: expected dim 2 of size 64, got shape [7, 2, 80]");
  ExpectInvalid(RotaryEmbedding(q, k, pos.Rows(0, 6), 10000.0f, 64), "positions: expected shape [7], got [6]");
  ExpectInvalid(RotaryEmbedding(q, k, pos, 0.0f, 64), "theta: expected a finite value > 0, got 0");
}

TEST(Validation, PagedAttentionChecksHeadsBatchAndIndexValues) {
  const Tensor cache = Tensor::Zeros({4, 16, 2, 64}, DType::kF32);
  const Tensor q = RandomTensor({5, 6, 64}, DType::kF32, 14);
  const Tensor out = Tensor::Empty({5, 6, 64}, DType::kF32);
  auto batch = [](std::vector<int32_t> starts, std::vector<int32_t> ctx, std::vector<int32_t> table) {
    const int64_t b = static_cast<int64_t>(ctx.size());
    return AttentionBatch{Tensor::FromInts(starts, {static_cast<int64_t>(starts.size())}), Tensor::FromInts(ctx, {b}),
                          Tensor::FromInts(table, {b, static_cast<int64_t>(table.size()) / b})};
  };
  const AttentionBatch good = batch({0, 5}, {20}, {3, 1});
  ExpectInvalid(PagedAttention(RandomTensor({5, 5, 64}, DType::kF32, 15), cache, cache, good, 0.125f,
                               Tensor::Empty({5, 5, 64}, DType::kF32)),
                "q: 5 query heads are not a multiple of the cache's 2 kv heads");
  ExpectInvalid(PagedAttention(q, cache, Tensor::Zeros({4, 16, 2, 80}, DType::kF32), good, 0.125f, out),
                "v_cache: expected shape [4, 16, 2, 64], got [4, 16, 2, 80]");
  ExpectInvalid(PagedAttention(q, cache, cache, batch({0, 5}, {20, 3}, {3, 1, 0, 0}), 0.125f, out),
                "query_start: expected shape [3], got [2]");
  ExpectInvalid(PagedAttention(q, cache, cache, batch({0, 4}, {20}, {3, 1}), 0.125f, out),
                "query_start must run from 0 to q's 5 rows, got 0 .. 4");
  ExpectInvalid(PagedAttention(q, cache, cache, batch({0, 5}, {4}, {3, 1}), 0.125f, out),
                "sequence 0: 5 query rows do not fit context_lens = 4");
  ExpectInvalid(PagedAttention(q, cache, cache, batch({0, 5}, {33}, {3, 1}), 0.125f, out),
                "sequence 0: context_lens = 33 needs 3 blocks but block_tables has 2 columns");
  ExpectInvalid(PagedAttention(q, cache, cache, batch({0, 5}, {20}, {3, 9}), 0.125f, out),
                "block_tables[0, 1] = 9 is outside the cache's 4 blocks");
}

TEST(Validation, SamplingChecksParamsAndK) {
  const Tensor logits = RandomTensor({7, 96}, DType::kF32, 16);
  const Tensor steps = Tensor::FromInts(std::vector<int32_t>(7, 0), {7});
  const Tensor out = Tensor::Empty({7}, DType::kI32);
  ExpectInvalid(Sample(logits, SamplingParams{1.0f, 0, 0.0f, 0}, steps, out), "top_p: expected a value in (0, 1], got 0");
  ExpectInvalid(Sample(logits, SamplingParams{1.0f, -2, 1.0f, 0}, steps, out), "top_k: expected >= 0, got -2");
  ExpectInvalid(Sample(logits, SamplingParams{}, steps, Tensor::Empty({7}, DType::kI64)),
                "out: expected dtype i32, got i64");
  ExpectInvalid(Argmax(Tensor::Empty({7, 0}, DType::kF32), out), "logits: expected at least one column, got shape [7, 0]");
  ExpectInvalid(TopK(logits, 97, Tensor::Empty({7, 97}, DType::kF32), Tensor::Empty({7, 97}, DType::kI32)),
                "k: expected a value in [0, 96], got 97");
  ExpectInvalid(TopK(logits, 4, Tensor::Empty({7, 4}, DType::kBF16), Tensor::Empty({7, 4}, DType::kI32)),
                "values: expected dtype f32, got bf16");
}

TEST(Validation, TensorsOnDifferentDevicesAreRejected) {
  // Host bytes labelled as a CUDA device: validation never touches them.
  std::vector<float> host(33 * 96);
  const Tensor w_dev = Tensor::Borrow(host.data(), {33, 96}, DType::kF32, Device::CUDA(0));
  ExpectInvalid(Matmul(RandomTensor({7, 96}, DType::kF32, 17), w_dev, Tensor::Empty({7, 33}, DType::kF32)),
                "w is on cuda:0 but x is on cpu");
}

#ifndef SEAM_HAVE_CUDA
// Every op has a CUDA launcher in a CUDA build; a build without the CUDA path
// must refuse CUDA tensors before touching them.
TEST(Validation, CudaTensorsInABuildWithoutCudaAreRejected) {
  std::vector<float> host(7 * 96 + 33 * 96 + 7 * 33);
  const Tensor x = Tensor::Borrow(host.data(), {7, 96}, DType::kF32, Device::CUDA(0));
  const Tensor w = Tensor::Borrow(host.data() + 7 * 96, {33, 96}, DType::kF32, Device::CUDA(0));
  const Tensor out = Tensor::Borrow(host.data() + 7 * 96 + 33 * 96, {7, 33}, DType::kF32, Device::CUDA(0));
  const absl::Status s = Matmul(x, w, out);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.message(), "Matmul: CUDA tensor given to a build without CUDA");
}
#endif

}  // namespace
}  // namespace seam::kernels
