// seam-bench-gpu allreduce-norm: the one-shot IPC all-reduce + add + RMSNorm
// against NCCL all-reduce + FusedAddRmsNorm, one thread per GPU, at each TP
// size of --tp that fits the visible GPUs. Each call is waited for (as
// NCCL's is); rank 0's median per-call latency is reported with the ratio
// and the choice of ChooseFusedAllReduce over the table measured in this
// run, and beside it the device time per call (fused_device_us,
// unfused_device_us: calls replayed back to back from a CUDA graph, as a
// decode step runs them; -1 when a call cannot be captured).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "gpu_bench_util.h"
#include "seam/comm/allreduce_choice.h"
#include "seam/comm/ipc_allreduce.h"
#include "seam/comm/nccl_communicator.h"
#include "seam/comm/store.h"
#include "seam/core/device_memory.h"

namespace seam::bench {
namespace {

// One TP size and hidden width: every rank's thread measures every token count.
struct AllReduceCase {
  int64_t tp = 2, hidden = 4096;
  std::vector<int64_t> token_list;
  int iters = 200;
  std::shared_ptr<comm::Store> store;
  // Rank 0's figures: per (tokens, hidden), the call latencies, and the device times (fused, unfused).
  comm::AllReduceNormTable table;
  std::map<std::pair<int64_t, int64_t>, std::pair<double, double>> device_us;
  std::vector<std::string> errors;
};

// Median microseconds of `call` waited for on `stream`, after 20 untimed; -1 on an error (in `error`).
double MedianCallUs(const std::function<absl::Status()>& call, cudaStream_t stream, int iters, std::string* error) {
  std::vector<double> us;
  for (int i = 0; i < iters + 20; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    absl::Status st = call();
    if (st.ok() && cudaStreamSynchronize(stream) != cudaSuccess) st = absl::InternalError("sync");
    if (!st.ok()) {
      *error = st.ToString();
      return -1;
    }
    if (i >= 20) us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(us.begin(), us.end());
  return us[us.size() / 2];
}

// Rank r: both paths at every token count; rank 0 writes the figures.
absl::Status MeasureRank(AllReduceCase& c, int r) {
  cudaSetDevice(r);
  SEAM_ASSIGN_OR_RETURN(CudaStream owned, CudaStream::Create(Device::CUDA(r)));
  const cudaStream_t stream = static_cast<cudaStream_t>(owned.handle());
  kernels::ScopedStream scoped(stream);
  const std::string prefix = "tp" + std::to_string(c.tp) + "_h" + std::to_string(c.hidden);
  SEAM_ASSIGN_OR_RETURN(auto fusion, comm::IpcAllReduceFusion::Create(comm::MakePrefixStore(prefix + "_ipc", c.store),
                                                                      r, static_cast<int>(c.tp), r, 256, c.hidden));
  comm::NcclOptions options;
  options.device = r;
  options.stream = stream;
  SEAM_ASSIGN_OR_RETURN(auto nccl, comm::MakeNcclCommunicator(comm::MakePrefixStore(prefix + "_nccl", c.store), "tp",
                                                              r, static_cast<int>(c.tp), options));
  const Device dev = Device::CUDA(r);
  for (int64_t tokens : c.token_list) {
    const Shape shape{tokens, c.hidden};
    Tensor partial = Tensor::Zeros(shape, DType::kBF16, dev), residual = Tensor::Zeros(shape, DType::kBF16, dev);
    Tensor out = Tensor::Zeros(shape, DType::kBF16, dev), weight = Tensor::Zeros({c.hidden}, DType::kBF16, dev);
    auto fused_call = [&] { return fusion->Run(partial, residual, weight, 1e-6f, out, stream); };
    auto unfused_call = [&]() -> absl::Status {
      SEAM_RETURN_IF_ERROR(nccl->AllReduce(partial));
      return kernels::FusedAddRmsNorm(partial, residual, weight, 1e-6f, out);
    };
    // Device time: 20 calls replayed back to back from one CUDA graph (the
    // calls above ran outside it first); -1 when a call cannot be captured.
    auto device_time = [&](const std::function<absl::Status()>& call) -> double {
      absl::StatusOr<double> us = GraphReplayUs(owned, call, 20);
      return us.ok() ? *us : -1;
    };
    std::string& error = c.errors[r];
    const double fused = MedianCallUs(fused_call, stream, c.iters, &error);
    const double unfused = MedianCallUs(unfused_call, stream, c.iters, &error);
    const double fused_device = device_time(fused_call), unfused_device = device_time(unfused_call);
    SEAM_RETURN_IF_ERROR(fusion->CheckError());
    if (r == 0) {
      c.table[{tokens, c.hidden}] = {fused, unfused};
      c.device_us[{tokens, c.hidden}] = {fused_device, unfused_device};
    }
  }
  fusion.reset();  // the fusion's teardown meets its peers' before the communicator goes
  nccl.reset();
  return absl::OkStatus();
}

// Rank 0's rows of one case, printed and added to `results`.
void ReportCase(const AllReduceCase& c, nlohmann::json& results) {
  for (const auto& [key, timing] : c.table) {
    const bool fused = comm::ChooseFusedAllReduce(key.first, key.second, c.table);
    nlohmann::json row = {{"tp", c.tp},
                          {"tokens", key.first},
                          {"hidden", key.second},
                          {"fused_us", timing.fused_us},
                          {"unfused_us", timing.unfused_us},
                          {"ratio", timing.fused_us / timing.unfused_us},
                          {"fused_device_us", c.device_us.at(key).first},
                          {"unfused_device_us", c.device_us.at(key).second},
                          {"chosen", fused ? "fused" : "unfused"}};
    std::cout << row.dump() << "\n";
    results.push_back(row);
  }
}

}  // namespace

int AllReduceNormBench(const Flags& flags) {
  const std::string dir = flags.Get("store", "/tmp/seam-bench-allreduce-norm-" + std::to_string(::getpid()));
  auto store = comm::MakeFileStore(dir);
  if (!store.ok()) {
    std::cerr << store.status() << "\n";
    return 1;
  }
  nlohmann::json results = nlohmann::json::array();
  int failures = 0;
  for (int64_t tp : flags.Ints("tp", "2,4")) {
    if (tp < 2 || tp > CudaDeviceCount()) {
      std::cerr << "allreduce-norm: skipping TP " << tp << " (" << CudaDeviceCount() << " GPUs visible)\n";
      continue;
    }
    for (int64_t hidden : flags.Ints("hidden", "4096,8192")) {
      AllReduceCase c{tp, hidden, flags.Ints("tokens", "1,7,64,256"), static_cast<int>(flags.Int("iters", 200)),
                      *store};
      c.errors.resize(tp);
      std::vector<std::thread> threads;
      for (int r = 0; r < tp; ++r) {
        threads.emplace_back([&c, r] {
          const absl::Status st = MeasureRank(c, r);
          if (!st.ok()) c.errors[r] = st.ToString();
        });
      }
      for (auto& t : threads) t.join();
      for (int r = 0; r < tp; ++r) {
        if (c.errors[r].empty()) continue;
        std::cerr << "allreduce-norm TP " << tp << " H " << hidden << " rank " << r << ": " << c.errors[r] << "\n";
        ++failures;
      }
      ReportCase(c, results);
    }
  }
  const std::string json_path = flags.Get("json", "");
  if (!json_path.empty()) std::ofstream(json_path) << results.dump(2) << "\n";
  return failures == 0 ? 0 : 1;
}

}  // namespace seam::bench
