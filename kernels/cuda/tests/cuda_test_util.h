// Shared pieces of the CUDA kernel tests: random host tensors, CUDA copies with
// poisoned outputs, and the element-wise comparison of a CUDA result with the
// CPU reference under a stated tolerance.
#pragma once

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <algorithm>
#include <functional>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "seam/core/device_memory.h"
#include "seam/core/tensor.h"
#include "seam/kernels/stream.h"

namespace seam::kernels::cuda_test {

inline Device Gpu() { return Device::CUDA(0); }

// Every test starts here: without a visible GPU there is nothing to compare.
class CudaKernelsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!CudaAvailable()) GTEST_SKIP() << "no CUDA device visible (or built without CUDA); CUDA kernel tests skipped";
  }
};

struct Tolerance {
  float rtol;
  float atol;
};

// f32: both sides compute in fp32 but sum in different orders (warp tree vs
// sequential) and use different libm (CUDA sincosf/expf vs glibc), so they
// agree to a few fp32 ulps: 1e-5 relative, with the same floor near zero.
// bf16/f16: each side rounds its own fp32 value once; fp32 differences of a
// few ulps can flip that rounding, so results may differ by one storage ulp,
// at most 2^-7 of the value for bf16 (2^-10 for f16).
inline Tolerance ToleranceFor(DType dtype) {
  switch (dtype) {
    case DType::kBF16:
      return {1.0f / 128, 1e-5f};
    case DType::kF16:
      return {1.0f / 1024, 1e-5f};
    default:
      return {1e-5f, 1e-5f};
  }
}
constexpr Tolerance kExact{0.0f, 0.0f};

inline Tensor Random(const Shape& shape, DType dtype, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> values(static_cast<size_t>(NumElements(shape)));
  for (float& v : values) v = dist(gen);
  return Tensor::FromFloats(values, shape, dtype);
}

// CUDA copy of a host tensor.
inline Tensor OnGpu(const Tensor& host) {
  absl::StatusOr<Tensor> t = host.To(Gpu());
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? *t : Tensor();
}

// CUDA tensor whose bytes are all 0xFF (NaN in every floating dtype), so an
// element the kernel forgets to write fails the comparison.
inline Tensor PoisonedGpu(const Shape& shape, DType dtype) {
  Tensor t = Tensor::Empty(shape, dtype, Gpu());
  EXPECT_EQ(cudaMemset(t.raw_data(), 0xFF, t.nbytes()), cudaSuccess);
  return t;
}

// Host tensor of the given shape filled with NaN (the poison of the CPU side).
inline Tensor PoisonedHost(const Shape& shape, DType dtype) {
  return Tensor::FromFloats(std::vector<float>(static_cast<size_t>(NumElements(shape)), std::nanf("")), shape,
                            dtype);
}

// Waits for the kernels, copies `gpu` back and compares it with `cpu` element by
// element: equal (infinities of one sign included) or |gpu - cpu| <= atol +
// rtol * |cpu|, NaN never passing.
inline void ExpectClose(const Tensor& gpu, const Tensor& cpu, Tolerance tol, const std::string& what) {
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << what << ": " << cudaGetErrorString(cudaGetLastError());
  absl::StatusOr<Tensor> host = gpu.To(Device::CPU());
  ASSERT_TRUE(host.ok()) << what << ": " << host.status();
  ASSERT_EQ(host->shape(), cpu.shape()) << what;
  const std::vector<float> got = host->ToFloats();
  const std::vector<float> want = cpu.ToFloats();
  const int64_t row = cpu.rank() > 0 && cpu.rows() > 0 ? cpu.numel() / cpu.rows() : 1;
  int64_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const bool ok = got[i] == want[i] || std::fabs(got[i] - want[i]) <= tol.atol + tol.rtol * std::fabs(want[i]);
    if (ok) continue;
    if (bad < 5) {
      ADD_FAILURE() << what << ": element " << i << " (row " << static_cast<int64_t>(i) / row << ") gpu " << got[i]
                    << " cpu " << want[i];
    }
    ++bad;
  }
  EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << got.size() << " elements outside rtol " << tol.rtol
                    << " atol " << tol.atol;
}

// A CUDA tensor whose data starts one element past a 16-byte boundary, so the
// kernels must take their scalar path even when the row length allows vectors.
inline Tensor MisalignedGpuCopy(const Tensor& host) {
  Tensor backing = Tensor::Empty({host.numel() + 1}, host.dtype(), Gpu());
  Tensor view = Tensor::OnStorage(backing.storage(), backing.byte_offset() + host.element_size(), host.shape(),
                                  host.dtype());
  EXPECT_TRUE(CopyInto(host, view).ok());
  return view;
}

// Runs `run` (which writes `out`) eagerly on a fresh stream of this thread,
// then captures it into a CUDA graph and replays that three times over a
// poisoned `out`; every result must match `want`.
inline void ExpectEagerAndGraphReplaysMatch(const std::function<absl::Status()>& run, const Tensor& out,
                                            const Tensor& want, Tolerance tol) {
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  ScopedStream scoped(stream);
  ASSERT_TRUE(run().ok());
  ExpectClose(out, want, tol, "eager, before the capture");
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), cudaSuccess);
  const absl::Status status = run();
  ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
  ASSERT_TRUE(status.ok()) << status;
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  for (int replay = 0; replay < 3; ++replay) {
    ASSERT_EQ(cudaMemsetAsync(out.raw_data(), 0xFF, out.nbytes(), stream), cudaSuccess);
    ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    ExpectClose(out, want, tol, "replay " + std::to_string(replay));
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
}

// Rows of distinct values: a random permutation of an even grid over
// [-scale / 2, scale / 2], (j + 0.5) * scale / n - scale / 2.
inline Tensor DistinctRows(int64_t rows, int64_t n, DType dtype, uint32_t seed, float scale = 20.0f) {
  std::mt19937 gen(seed);
  std::vector<float> values(static_cast<size_t>(rows * n));
  std::vector<int64_t> perm(static_cast<size_t>(n));
  for (int64_t r = 0; r < rows; ++r) {
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), gen);
    for (int64_t j = 0; j < n; ++j) {
      values[r * n + j] = (static_cast<float>(perm[j]) + 0.5f) * scale / static_cast<float>(n) - scale / 2;
    }
  }
  return Tensor::FromFloats(values, {rows, n}, dtype);
}

// An i32 device tensor's values, after the device finishes its work.
inline std::vector<int32_t> ToInts(const Tensor& t) {
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  absl::StatusOr<Tensor> host = t.To(Device::CPU());
  EXPECT_TRUE(host.ok()) << host.status();
  if (!host.ok()) return {};
  return std::vector<int32_t>(host->data<int32_t>(), host->data<int32_t>() + host->numel());
}

// An i32 host tensor's values.
inline std::vector<int32_t> HostInts(const Tensor& t) {
  return std::vector<int32_t>(t.data<int32_t>(), t.data<int32_t>() + t.numel());
}

// An i32 device tensor of -1 everywhere (0xFF bytes), so unwritten entries show.
inline Tensor PoisonedIndexGpu(const Shape& shape) {
  Tensor t = Tensor::Empty(shape, DType::kI32, Gpu());
  EXPECT_EQ(cudaMemset(t.raw_data(), 0xFF, t.nbytes()), cudaSuccess);
  return t;
}

}  // namespace seam::kernels::cuda_test
