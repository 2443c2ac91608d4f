// The helpers every seam-bench-gpu mode shares (bench/ only): --key value
// flags, exiting on a failed status, CUDA-event timing on the current
// stream, random device tensors and tokens, the device copy bandwidth that
// floors are stated against, and JSON output. The modes of other files are
// declared at the end.
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "seam/core/cuda_check.h"
#include "seam/core/cuda_graph.h"
#include "seam/core/status.h"
#include "seam/core/tensor.h"
#include "seam/kernels/ops.h"
#include "seam/kernels/stream.h"
#include "seam/runtime/measured_peaks.h"

namespace seam::bench {

using json = nlohmann::json;

inline const Device kGpu = Device::CUDA(0);

// --key value pairs after the subcommand.
class Flags {
 public:
  Flags(int argc, char** argv) {
    for (int i = 2; i + 1 < argc; i += 2) values_[std::string(argv[i]).substr(2)] = argv[i + 1];
  }
  std::string Get(const std::string& key, const std::string& fallback) const {
    auto it = values_.find(key);
    return it == values_.end() ? fallback : it->second;
  }
  int64_t Int(const std::string& key, int64_t fallback) const {
    int64_t v = fallback;
    auto it = values_.find(key);
    if (it != values_.end() && !absl::SimpleAtoi(it->second, &v)) {
      std::cerr << "--" << key << ": not an integer: " << it->second << "\n";
      std::exit(2);
    }
    return v;
  }
  std::vector<int64_t> Ints(const std::string& key, const std::string& fallback) const {
    std::vector<int64_t> out;
    for (absl::string_view part : absl::StrSplit(Get(key, fallback), ',')) {
      int64_t v = 0;
      if (!absl::SimpleAtoi(part, &v)) {
        std::cerr << "--" << key << ": not a list of integers\n";
        std::exit(2);
      }
      out.push_back(v);
    }
    return out;
  }

 private:
  std::map<std::string, std::string> values_;
};

inline void Check(const absl::Status& s, const char* what) {
  if (!s.ok()) {
    std::cerr << what << ": " << s << "\n";
    std::exit(1);
  }
}

template <typename T>
T Value(absl::StatusOr<T> v, const char* what) {
  Check(v.status(), what);
  return std::move(*v);
}

inline DType ParseDType(const std::string& name) {
  if (name == "bf16") return DType::kBF16;
  if (name == "f32") return DType::kF32;
  if (name == "f16") return DType::kF16;
  std::cerr << "--dtype: expected bf16, f16 or f32, got " << name << "\n";
  std::exit(2);
}

inline void WriteJson(const Flags& flags, const json& j) {
  const std::string path = flags.Get("json", "");
  std::cout << j.dump(2) << "\n";
  if (!path.empty()) std::ofstream(path) << j.dump(2) << "\n";
}

// Mean microseconds of `body` over `iters` launches on the current stream,
// after `warmup` untimed ones, measured with CUDA events.
inline double TimeUs(const std::function<void()>& body, int iters, int warmup = 5) {
  cudaStream_t s = static_cast<cudaStream_t>(kernels::CurrentStream());
  for (int i = 0; i < warmup; ++i) body();
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  cudaEventRecord(start, s);
  for (int i = 0; i < iters; ++i) body();
  cudaEventRecord(stop, s);
  Check(SEAM_CUDA_STATUS(cudaEventSynchronize(stop)), "timing");
  float ms = 0;
  cudaEventElapsedTime(&ms, start, stop);
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return 1000.0 * ms / iters;
}

inline Tensor RandomGpu(const Shape& shape, DType dtype, uint32_t seed, float scale = 1.0f) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-scale, scale);
  std::vector<float> v(static_cast<size_t>(NumElements(shape)));
  for (float& x : v) x = dist(gen);
  return Value(Tensor::FromFloats(v, shape, dtype).To(kGpu), "upload");
}

// Device-to-device copy bandwidth in GB/s of traffic (bytes read + written),
// as every seam benchmark measures it (runtime/measured_peaks.h).
inline double CopyGbps(size_t bytes) {
  return Value(runtime::CopyBytesPerSecond(kGpu, bytes), "copy bandwidth") / 1e9;
}

// seam's bf16 matmul rate at 8192³ in TFLOP/s (runtime/measured_peaks.h):
// the tensor-core peak that kernels' FLOP floors are stated against.
inline double Bf16PeakTflops() {
  const runtime::MatmulShape square{8192, 8192, 8192, "square"};
  return Value(runtime::MatmulFlopsPerSecond(kGpu, DType::kBF16, square), "matmul peak") / 1e12;
}

inline std::vector<int32_t> ArgmaxToHost(const Tensor& logits) {
  Tensor ids = Tensor::Empty({logits.rows()}, DType::kI32, logits.device());
  Check(kernels::Argmax(logits, ids), "argmax");
  Tensor host = Value(ids.To(Device::CPU()), "download");
  return std::vector<int32_t>(host.data<int32_t>(), host.data<int32_t>() + host.numel());
}
inline std::vector<int32_t> RandomTokens(uint32_t seed, int64_t n, int64_t vocab) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int32_t> dist(1, static_cast<int32_t>(vocab - 1));
  std::vector<int32_t> v(n);
  for (int32_t& t : v) t = dist(gen);
  return v;
}
// The median of `v` (the mean of the middle two for an even count; 0 when empty).
inline double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// max |a - b| over max |a| (the absolute difference when a is all zeros); a and b of one size.
inline double MaxRelativeDifference(const std::vector<float>& a, const std::vector<float>& b) {
  double scale = 0, err = 0;
  for (size_t k = 0; k < a.size(); ++k) {
    scale = std::max(scale, static_cast<double>(std::fabs(a[k])));
    err = std::max(err, static_cast<double>(std::fabs(a[k] - b[k])));
  }
  return scale > 0 ? err / scale : err;
}

inline double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

// Mean microseconds per call of `call`, `calls` of them captured on `stream`
// into one CUDA graph and the graph replayed (TimeUs: events around 20
// replays after 3). `call` must already have run once outside the capture.
inline absl::StatusOr<double> GraphReplayUs(const CudaStream& stream, const std::function<absl::Status()>& call,
                                            int calls) {
  kernels::ScopedStream on(stream.handle());
  SEAM_ASSIGN_OR_RETURN(CudaGraph graph, CudaGraph::Capture(stream, [&]() -> absl::Status {
                          for (int i = 0; i < calls; ++i) SEAM_RETURN_IF_ERROR(call());
                          return absl::OkStatus();
                        }));
  return TimeUs([&] { Check(graph.Launch(stream), "launch"); }, 20, 3) / calls;
}

// allreduce_norm_bench.cc: the one-shot IPC all-reduce + add + RMSNorm against NCCL + the fused add+norm.
int AllReduceNormBench(const Flags& flags);
// mamba_bench.cc: a Nemotron-H checkpoint's decode and Mamba prefill kernels.
int MambaBench(const Flags& flags);
// tbo_bench.cc: two-batch overlap of a Qwen3-MoE prefill at TP 2 against the ordinary forward.
int TboBench(const Flags& flags);
// cp_bench.cc: one long prompt's prefill at CP 1 (one GPU) against CP N (N GPUs, context-parallel).
int CpBench(const Flags& flags);
// moe_kernels_bench.cc: a MoE layer's expert kernels alone, old and new, against their own bytes and FLOPs.
int MoeKernelsBench(const Flags& flags);
// attention_bench.cc: PagedAttention alone (decode rows, mixed steps) vs the floor of its KV bytes.
int AttentionBench(const Flags& flags);
// latent_attention_bench.cc: PagedLatentAttention decode vs its bytes and FLOPs floors.
int LatentAttentionBench(const Flags& flags);

// decode_kernels_bench.cc: the decode step's matmuls (heuristic pick vs autotuned) and its argmax vs their floors.
int MatmulBench(const Flags& flags);
int ArgmaxBench(const Flags& flags);

// The floor of one matmul out[m, n] = x[m, k] · w[n, k]ᵀ: its bytes (x, w
// read once, out written once) at copy bandwidth or its FLOPs at the bf16
// matmul peak, whichever takes longer (decode_kernels_bench.cc).
struct MatmulFloor {
  double bytes = 0, flops = 0;
  double bytes_us = 0, flops_us = 0, floor_us = 0;
};
MatmulFloor MatmulFloorOf(int64_t m, int64_t n, int64_t k, DType in, DType out, double copy_gbps, double peak_tflops);
json MatmulFloorJson(const MatmulFloor& f);

}  // namespace seam::bench
