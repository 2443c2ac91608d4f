// IpcAllReduceFusion on real GPUs (one thread per GPU; skipped with fewer
// than two). Tolerances:
//  * against kernels::FusedAddRmsNorm applied to the host's rank-order fp32
//    sum rounded to bf16: bit-identical residual and out;
//  * NCCL's bf16 all-reduce against that host sum: at most one bf16 ulp per
//    element (NCCL may add in another order; at TP 2 the two orders agree);
//  * against NCCL all-reduce + FusedAddRmsNorm: bit-identical on every row
//    whose NCCL sum equals the rank-order sum; on other rows |Δ| ≤ 2 bf16
//    ulps of the larger magnitude plus one ulp of the row's largest |sum|.
#include "seam/comm/ipc_allreduce.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <random>

#include <gtest/gtest.h>

#include "comm_test_util.h"
#include "absl/strings/str_cat.h"
#include "seam/comm/nccl_communicator.h"
#include "seam/core/device_memory.h"
#include "seam/core/dtype.h"
#include "seam/kernels/ops.h"
#include "seam/kernels/stream.h"

namespace seam::comm {
namespace {

using testing::RunRanks;

float Bf16Ulp(float v) {
  const float a = std::fabs(v);
  if (a == 0.0f) return 0.0f;
  int e = 0;
  std::frexp(a, &e);  // a = m · 2^e, m in [0.5, 1)
  return std::ldexp(1.0f, e - 8);
}

Tensor OnGpu(const std::vector<float>& v, const Shape& shape, int device) {
  return Tensor::FromFloats(v, shape, DType::kBF16).To(Device::CUDA(device)).value();
}

std::vector<float> ToHost(const Tensor& t) { return t.To(Device::CPU())->ToFloats(); }

void CheckTp(int n) {
  testing::TempDir dir;
  auto store = MakeFileStore(dir.path());
  ASSERT_TRUE(store.ok()) << store.status();
  const float eps = 1e-6f;
  for (int64_t hidden : {int64_t{4096}, int64_t{8192}}) {
    RunRanks(n, [&](int r) {
      ASSERT_EQ(cudaSetDevice(r), cudaSuccess);
      cudaStream_t stream;
      ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
      kernels::ScopedStream scoped(stream);
      const std::string prefix = absl::StrCat("tp", n, "_h", hidden);
      auto fusion = IpcAllReduceFusion::Create(MakePrefixStore(prefix + "_ipc", *store), r, n, r, 256, hidden);
      ASSERT_TRUE(fusion.ok()) << fusion.status();
      NcclOptions options;
      options.device = r;
      options.stream = stream;
      auto nccl = MakeNcclCommunicator(MakePrefixStore(prefix + "_nccl", *store), "tp", r, n, options);
      ASSERT_TRUE(nccl.ok()) << nccl.status();
      for (int64_t tokens : {int64_t{1}, int64_t{7}, int64_t{64}, int64_t{256}, int64_t{7}}) {
        const int64_t numel = tokens * hidden;
        // Every rank builds every rank's data from the same seed.
        std::mt19937 rng(static_cast<uint32_t>(tokens * 131 + hidden));
        std::normal_distribution<float> dist(0.0f, 1.0f);
        std::vector<std::vector<float>> partials(n, std::vector<float>(numel));
        for (auto& p : partials) {
          for (float& v : p) v = BF16ToFloat(FloatToBF16(dist(rng)));
        }
        std::vector<float> residual(numel), weight(hidden);
        for (float& v : residual) v = dist(rng);
        for (float& v : weight) v = 1.0f + 0.1f * dist(rng);
        std::vector<float> sum(numel);
        for (int64_t i = 0; i < numel; ++i) {
          float acc = partials[0][i];
          for (int q = 1; q < n; ++q) acc += partials[q][i];
          sum[i] = acc;  // FromFloats rounds to bf16 once
        }
        const Shape shape{tokens, hidden};
        const Tensor w = OnGpu(weight, {hidden}, r);

        Tensor res_f = OnGpu(residual, shape, r);
        Tensor out_f = Tensor::TryEmpty(shape, DType::kBF16, Device::CUDA(r)).value();
        ASSERT_TRUE((*fusion)->Run(OnGpu(partials[r], shape, r), res_f, w, eps, out_f, stream).ok());
        ASSERT_TRUE((*fusion)->CheckError().ok());

        Tensor res_a = OnGpu(residual, shape, r);
        Tensor out_a = Tensor::TryEmpty(shape, DType::kBF16, Device::CUDA(r)).value();
        ASSERT_TRUE(kernels::FusedAddRmsNorm(OnGpu(sum, shape, r), res_a, w, eps, out_a).ok());

        Tensor x_n = OnGpu(partials[r], shape, r);
        ASSERT_TRUE((*nccl)->AllReduce(x_n).ok());
        Tensor res_n = OnGpu(residual, shape, r);
        Tensor out_n = Tensor::TryEmpty(shape, DType::kBF16, Device::CUDA(r)).value();
        ASSERT_TRUE(kernels::FusedAddRmsNorm(x_n, res_n, w, eps, out_n).ok());
        ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);

        const std::vector<float> rf = ToHost(res_f), of = ToHost(out_f), ra = ToHost(res_a), oa = ToHost(out_a);
        const std::vector<float> xn = ToHost(x_n), rn = ToHost(res_n), on = ToHost(out_n);
        const std::vector<float> xs = Tensor::FromFloats(sum, shape, DType::kBF16).ToFloats();
        int64_t mismatches = 0;
        for (int64_t row = 0; row < tokens; ++row) {
          bool same_sum = true;
          float row_max = 0.0f;
          for (int64_t c = 0; c < hidden; ++c) {
            const int64_t i = row * hidden + c;
            if (std::fabs(xn[i] - xs[i]) > Bf16Ulp(std::max(std::fabs(xn[i]), std::fabs(xs[i])))) ++mismatches;
            same_sum = same_sum && xn[i] == xs[i];
            row_max = std::max(row_max, std::fabs(xs[i]));
          }
          for (int64_t c = 0; c < hidden; ++c) {
            const int64_t i = row * hidden + c;
            if (rf[i] != ra[i] || of[i] != oa[i]) ++mismatches;
            if (same_sum) {
              if (rf[i] != rn[i] || of[i] != on[i]) ++mismatches;
            } else {
              const auto close = [&](float a, float b, float extra) {
                return std::fabs(a - b) <= 2 * Bf16Ulp(std::max(std::fabs(a), std::fabs(b))) + extra;
              };
              if (!close(rf[i], rn[i], Bf16Ulp(row_max)) || !close(of[i], on[i], Bf16Ulp(row_max))) ++mismatches;
            }
          }
        }
        EXPECT_EQ(mismatches, 0) << "TP " << n << " rank " << r << " T " << tokens << " H " << hidden;
        if (n == 2) {
          EXPECT_EQ(xn, xs) << "two-rank NCCL sums must equal the rank-order sum";
        }
      }
      fusion->reset();
      nccl->reset();
      cudaStreamDestroy(stream);
    });
  }
}

TEST(IpcAllReduceTest, MatchesRankOrderReferenceAndNcclAtTp2) {
  if (CudaDeviceCount() < 2) {
    GTEST_SKIP() << "needs two GPUs (" << CudaDeviceCount() << " visible)";
  }
  CheckTp(2);
}

TEST(IpcAllReduceTest, MatchesRankOrderReferenceAndNcclAtTp4) {
  if (CudaDeviceCount() < 4) {
    GTEST_SKIP() << "needs four GPUs (" << CudaDeviceCount() << " visible)";
  }
  CheckTp(4);
}

TEST(IpcAllReduceTest, RejectsBadArguments) {
  testing::TempDir dir;
  auto store = MakeFileStore(dir.path());
  ASSERT_TRUE(store.ok());
  EXPECT_FALSE(IpcAllReduceFusion::Create(*store, 0, 1, 0, 256, 4096).ok());  // size < 2
  EXPECT_FALSE(IpcAllReduceFusion::Create(*store, 0, 2, 0, 256, 4100).ok());  // hidden % 8
  EXPECT_FALSE(IpcAllReduceFusion::Create(*store, 0, 2, 0, 0, 4096).ok());    // max_tokens
  EXPECT_FALSE(IpcAllReduceFusion::Create(nullptr, 0, 2, 0, 256, 4096).ok());
}

}  // namespace
}  // namespace seam::comm
