// seam-bench-gpu matmul / argmax: the decode step's matmuls and its greedy
// argmax alone at decode batch sizes, each against its floor measured in the
// same run (bench/gpu/README.md):
//   matmul  the model's q|k|v, o, gate|up, down and lm_head (f32 logits) at
//           each --rows M, under the heuristic's first pick (MatmulTuning
//           candidates 1) and autotuned (the default), graph-replayed us per
//           call against max(bytes / copy bandwidth, FLOPs / bf16 matmul
//           peak), with the kernel each chose
//   argmax  Argmax over rows x vocabulary logits (f32, bf16) against its
//           bytes / copy bandwidth
#include <cuda_runtime_api.h>

#include <algorithm>
#include <functional>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_split.h"
#include "gpu_bench_util.h"
#include "seam/core/cuda_graph.h"
#include "seam/kernels/matmul_tuning.h"
#include "seam/kernels/ops.h"
#include "seam/kernels/stream.h"
#include "seam/weights/model_config.h"

namespace seam::bench {
namespace {

// Mean us per call replayed from a graph of 20 calls, after one call outside the capture on the graph's stream.
double ReplayUs(const std::function<void()>& body) {
  CudaStream stream = Value(CudaStream::Create(kGpu), "stream");
  kernels::ScopedStream on(stream.handle());
  body();
  Check(stream.Synchronize(), "sync");
  return Value(GraphReplayUs(stream, [&] {
                 body();
                 return absl::OkStatus();
               }, 20),
               "capture");
}

struct DecodeMatmul {
  const char* name;
  int64_t n, k;
  DType out;
};

std::vector<DecodeMatmul> DecodeMatmuls(const weights::ModelConfig& c, DType dt) {
  const int64_t d = c.head_dim, h = c.hidden_size;
  return {{"qkv", (c.num_attention_heads + 2 * c.num_key_value_heads) * d, h, dt},
          {"o", h, c.num_attention_heads * d, dt},
          {"gate_up", 2 * c.intermediate_size, h, dt},
          {"down", h, c.intermediate_size, dt},
          {"lm_head_f32", c.vocab_size, h, DType::kF32}};
}

}  // namespace

MatmulFloor MatmulFloorOf(int64_t m, int64_t n, int64_t k, DType in, DType out, double copy_gbps,
                          double peak_tflops) {
  MatmulFloor f;
  f.bytes = static_cast<double>((m * k + n * k) * static_cast<int64_t>(DTypeSize(in)) +
                                m * n * static_cast<int64_t>(DTypeSize(out)));
  f.flops = 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  f.bytes_us = f.bytes / copy_gbps / 1e3;
  f.flops_us = f.flops / peak_tflops / 1e6;
  f.floor_us = std::max(f.bytes_us, f.flops_us);
  return f;
}

json MatmulFloorJson(const MatmulFloor& f) {
  return {{"bytes", f.bytes}, {"flops", f.flops}, {"bytes_us", f.bytes_us}, {"flops_us", f.flops_us},
          {"floor_us", f.floor_us}, {"bound", f.flops_us > f.bytes_us ? "flops" : "bytes"}};
}

int MatmulBench(const Flags& flags) {
  const weights::ModelConfig c = Value(weights::LoadModelConfig(flags.Get("checkpoint", "")), "config.json");
  const DType dt = ParseDType(flags.Get("dtype", "bf16"));
  const std::vector<int64_t> rows = flags.Ints("rows", "1,2,3,4,8,16,32,64,128,256,512");
  const double copy_gbps = CopyGbps(size_t{1} << 30);
  const double peak = flags.Get("peak-tflops", "").empty() ? Bf16PeakTflops()
                                                           : static_cast<double>(flags.Int("peak-tflops", 0));
  const kernels::MatmulTuning chosen = kernels::GetMatmulTuning();  // the command line's, if any
  json results = json::array();
  for (const std::string& mode : {std::string("heuristic"), std::string("tuned")}) {
    kernels::MatmulTuning tuning = chosen;
    if (mode == "heuristic") tuning.candidates = 1;
    if (mode == "tuned" && tuning.candidates == 1) tuning.candidates = 16;  // the default is the heuristic's pick
    Check(kernels::SetMatmulTuning(tuning), "tuning");
    // A fresh thread: fresh plans, so every problem is chosen under this mode.
    std::thread worker([&] {
      Check(SEAM_CUDA_STATUS(cudaSetDevice(0)), "device");
      for (const DecodeMatmul& s : DecodeMatmuls(c, dt)) {
        const Tensor w = RandomGpu({s.n, s.k}, dt, 7, 0.02f);
        for (int64_t m : rows) {
          const Tensor x = RandomGpu({m, s.k}, dt, 8);
          const Tensor out = Tensor::Empty({m, s.n}, s.out, kGpu);
          const double us = ReplayUs([&] { Check(kernels::Matmul(x, w, out), s.name); });
          const MatmulFloor f = MatmulFloorOf(m, s.n, s.k, dt, s.out, copy_gbps, peak);
          json row = {{"mode", mode}, {"op", s.name}, {"m", m}, {"n", s.n}, {"k", s.k}, {"us", us},
                      {"floor_ratio", us / f.floor_us}, {"floor", MatmulFloorJson(f)}};
          for (const kernels::MatmulChoice& ch : kernels::MatmulChoices()) {
            if (ch.m != m || ch.n != s.n || ch.k != s.k) continue;
            row["kernel"] = ch.kernel;
            row["algorithm"] = ch.algorithm;
            row["timed"] = ch.timed;
            row["kept"] = ch.kept;
            row["first_us"] = ch.first_us;
            row["kept_us"] = ch.kept_us;
          }
          std::cerr << mode << " " << s.name << " M=" << m << " " << us << " us, floor " << f.floor_us << " us ("
                    << (f.flops_us > f.bytes_us ? "flops" : "bytes") << "), " << row.value("kernel", "") << "\n";
          results.push_back(row);
        }
      }
    });
    worker.join();
  }
  Check(kernels::SetMatmulTuning(chosen), "tuning");
  WriteJson(flags, {{"copy_gbps", copy_gbps}, {"peak_tflops", peak}, {"dtype", flags.Get("dtype", "bf16")},
                    {"candidates", chosen.candidates}, {"max_tuned_rows", chosen.max_tuned_rows},
                    {"note", "us: graph-replayed mean per call; floor_us = max(bytes / copy_gbps, flops / "
                             "peak_tflops); heuristic = cuBLASLt's first pick (MatmulTuning candidates 1)"},
                    {"results", results}});
  return 0;
}

int ArgmaxBench(const Flags& flags) {
  const double copy_gbps = CopyGbps(size_t{1} << 30);
  json results = json::array();
  for (const std::string& name : std::vector<std::string>(absl::StrSplit(flags.Get("dtypes", "f32,bf16"), ','))) {
    const DType dt = ParseDType(name);
    for (int64_t n : flags.Ints("vocab", "32000,151936")) {
      for (int64_t rows : flags.Ints("rows", "1,8,64,128,256")) {
        const Tensor logits = RandomGpu({rows, n}, dt, 11, 10.0f);
        const Tensor ids = Tensor::Empty({rows}, DType::kI32, kGpu);
        auto body = [&] { Check(kernels::Argmax(logits, ids), "argmax"); };
        const double eager = TimeUs(body, 200), graph = ReplayUs(body);
        const double bytes = static_cast<double>(logits.nbytes() + ids.nbytes());
        const double floor_us = bytes / copy_gbps / 1e3;
        std::cerr << "argmax " << name << " " << rows << " x " << n << ": " << graph << " us, floor " << floor_us
                  << " us\n";
        results.push_back({{"dtype", name}, {"rows", rows}, {"n", n}, {"eager_us", eager}, {"graph_us", graph},
                           {"bytes", bytes}, {"floor_us", floor_us}, {"floor_ratio", graph / floor_us}});
      }
    }
  }
  WriteJson(flags, {{"copy_gbps", copy_gbps},
                    {"note", "floor_us: the logits read once (and the indices written) at copy_gbps"},
                    {"results", results}});
  return 0;
}

}  // namespace seam::bench
