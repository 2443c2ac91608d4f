// seam-bench-gpu moe-kernels: one MoE layer's experts alone on one GPU (by
// default Qwen3-30B-A3B's layer: hidden 2048, 128 experts, top 8,
// moe_intermediate 768, bf16) at each of --batches rows and each of
// --routings (uniform: distinct random experts a row; skewed: expert e drawn
// ∝ 1 / (e + 1)², so a few experts take most pairs and most take none;
// hot: expert 0 in every row), each way of running the experts timed in the
// same run:
//   classic      ExpertMatmul (gate | up), SiluAndMul, ExpertMatmul (down):
//                the earlier grouped path
//   gemv         ExpertGateUpSilu + ExpertDown on the decode GEMV
//   tensor_core  ExpertGateUpSilu + ExpertDown on the tensor-core grouped GEMM
//   per_expert   each active expert's rows through its own cuBLASLt matmuls
//                and a SiLU-mul (the offsets read once, outside the timing:
//                a lower bound of the one-by-one path)
// The grouped ways are timed replayed from a CUDA graph of 10 calls (as a
// decode step runs them), per_expert eagerly; the routing ops (MoeRoute,
// SortRoutesByExpert, GroupByExpert) and MoeFinalize beside them. Each
// expert step is stated against its floor: the larger of the bytes it must
// move (every expert the batch routes to read once, x, the activations
// written and read, the outputs written) at the copy bandwidth and its
// matmul FLOPs at the bf16 peak, both measured here. Every expert has the
// same random weights (one expert's, copied), so the ways' outputs can be
// compared: max_rel_diff_vs_classic. Last, the table --moe-experts auto
// would keep from this run's uniform-routing times (models'
// ExpertPathTable: fused, the ExpertKernel::kAuto way of the batch, against
// grouped, the classic way; printed and in the JSON as "choice").
#include <set>

#include "gpu_bench_util.h"
#include "seam/core/cuda_graph.h"
#include "seam/core/device_memory.h"
#include "seam/kernels/moe_experts.h"
#include "src/expert_path_choice.h"

namespace seam::bench {
namespace {

struct Shape4 {
  int64_t hidden, inter, experts, top_k;
  DType dtype;
};

std::vector<int32_t> Routes(int64_t rows, const Shape4& s, const std::string& routing, uint32_t seed) {
  std::mt19937 gen(seed);
  std::vector<double> weight(s.experts, 1.0);
  if (routing == "skewed") {
    for (int64_t e = 0; e < s.experts; ++e) weight[e] = 1.0 / static_cast<double>((e + 1) * (e + 1));
  }
  std::vector<int32_t> ids;
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<double> left = weight;
    int64_t taken = 0;
    if (routing == "hot") {
      ids.push_back(0);
      left[0] = 0.0;
      taken = 1;
    }
    for (; taken < s.top_k; ++taken) {
      std::discrete_distribution<int32_t> pick(left.begin(), left.end());
      const int32_t e = pick(gen);
      ids.push_back(e);
      left[e] = 0.0;
    }
  }
  return ids;
}

// [E, rows, cols] with every expert's matrix the same random one.
Tensor StackedWeights(int64_t experts, int64_t rows, int64_t cols, DType dt, uint32_t seed) {
  const Tensor one = RandomGpu({rows, cols}, dt, seed, 0.05f);
  Tensor all = Tensor::Empty({experts, rows, cols}, dt, kGpu);
  for (int64_t e = 0; e < experts; ++e) Check(CopyInto(one, all.Rows(e, 1).Reshape({rows, cols}).value()), "copy");
  return all;
}

// Mean µs per call of `call` replayed from a CUDA graph of 10 calls.
double GraphUs(const CudaStream& stream, const std::function<absl::Status()>& call) {
  kernels::ScopedStream on(stream.handle());
  Check(call(), "warm-up");
  Check(stream.Synchronize(), "sync");
  const CudaGraph graph = Value(CudaGraph::Capture(stream, [&]() -> absl::Status {
                                  for (int i = 0; i < 10; ++i) SEAM_RETURN_IF_ERROR(call());
                                  return absl::OkStatus();
                                }),
                                "capture");
  return TimeUs([&] { Check(graph.Launch(stream), "launch"); }, 20, 3) / 10;
}

struct Layer {
  Tensor gate_up, down;  // [E, 2I, H], [E, H, I]
};

// One by one, eagerly: the pairs' rows gathered, each active expert's
// matmuls (the offsets read once, outside the timing), scattered back.
double PerExpertUs(const Shape4& s, const Layer& w, const Tensor& x, const kernels::ExpertGroups& groups,
                   const Tensor& gu, const Tensor& act, const Tensor& out) {
  const int64_t h = s.hidden, inter = s.inter, pairs = groups.pairs();
  const Tensor offsets = Value(groups.offsets.To(Device::CPU()), "offsets");
  const int32_t* at = offsets.data<int32_t>();
  const Tensor gathered = Tensor::Empty({pairs, h}, s.dtype, kGpu), back = Tensor::Empty({pairs, h}, s.dtype, kGpu);
  return TimeUs([&] {
    Check(kernels::GatherPairs(x, groups, gathered), "gather");
    for (int64_t e = 0; e < s.experts; ++e) {
      const int64_t m = at[e + 1] - at[e];
      if (m == 0) continue;
      Check(kernels::Matmul(gathered.Rows(at[e], m), w.gate_up.Rows(e, 1).Reshape({2 * inter, h}).value(),
                            gu.Rows(at[e], m)), "gate_up");
    }
    Check(kernels::SiluAndMul(gu, act), "silu");
    for (int64_t e = 0; e < s.experts; ++e) {
      const int64_t m = at[e + 1] - at[e];
      if (m == 0) continue;
      Check(kernels::Matmul(act.Rows(at[e], m), w.down.Rows(e, 1).Reshape({h, inter}).value(), back.Rows(at[e], m)),
            "down");
    }
    Check(kernels::ScatterPairs(back, groups, out), "scatter");
  }, 10, 2);
}

// The routing and the finalize around the experts, graph-replayed.
json AroundUs(const Shape4& s, int64_t rows, const Tensor& ids, const kernels::ExpertGroups& groups,
              const Tensor& expert_out, const CudaStream& stream) {
  const int64_t k = s.top_k;
  const Tensor router_logits = RandomGpu({rows, s.experts}, DType::kF32, 5);
  const Tensor route_w = Tensor::Empty({rows, k}, DType::kF32, kGpu);
  const Tensor route_e = Tensor::Empty({rows, k}, DType::kI32, kGpu);
  const Tensor final_out = Tensor::Empty({rows, s.hidden}, s.dtype, kGpu);
  const Tensor y = expert_out.Reshape({rows, k, s.hidden}).value();
  return {{"moe_route_us",
           GraphUs(stream, [&] { return kernels::MoeRoute(router_logits, k, true, route_w, route_e); })},
          {"sort_routes_us", GraphUs(stream, [&] { return kernels::SortRoutesByExpert(route_w, route_e); })},
          {"group_by_expert_us", GraphUs(stream, [&] { return kernels::GroupByExpert(ids, groups); })},
          {"finalize_us", GraphUs(stream, [&] { return kernels::MoeFinalize(y, route_w, final_out); })}};
}

// One batch and routing: every way's time, its floor and agreement.
json Case(const Shape4& s, const Layer& w, int64_t rows, const std::string& routing, double copy_gbps,
          double peak_tflops, const CudaStream& stream) {
  const DType dt = s.dtype;
  const int64_t h = s.hidden, inter = s.inter, k = s.top_k, pairs = rows * k;
  const std::vector<int32_t> ids = Routes(rows, s, routing, static_cast<uint32_t>(rows * 7 + routing.size()));
  const std::set<int32_t> active(ids.begin(), ids.end());
  const Tensor x = RandomGpu({rows, h}, dt, 3), gpu_ids = Value(Tensor::FromInts(ids, {rows, k}).To(kGpu), "ids");
  const kernels::ExpertGroups groups = Value(kernels::ExpertGroups::Empty(s.experts, pairs, kGpu), "groups");
  kernels::ScopedStream on(stream.handle());
  Check(kernels::GroupByExpert(gpu_ids, groups), "group");
  const Tensor gu = Tensor::Empty({pairs, 2 * inter}, dt, kGpu), act = Tensor::Empty({pairs, inter}, dt, kGpu);
  const Tensor out_classic = Tensor::Empty({pairs, h}, dt, kGpu), out = Tensor::Empty({pairs, h}, dt, kGpu);
  const double es = DTypeSize(dt);
  const double bytes = static_cast<double>(active.size()) * 3.0 * inter * h * es + rows * h * es +
                       2.0 * pairs * inter * es + pairs * h * es;
  const double flops = 2.0 * pairs * 3.0 * inter * h;
  const double floor_us = std::max(bytes / copy_gbps / 1e3, flops / peak_tflops / 1e6);
  json ways = json::object();
  auto record = [&](const char* name, double us, const Tensor* result) {
    json row = {{"us", us}, {"floor_ratio", us / floor_us}, {"gbps", bytes / us / 1e3},
                {"tflops", flops / us / 1e6}};
    if (result != nullptr) {
      Check(stream.Synchronize(), "sync");
      row["max_rel_diff_vs_classic"] = MaxRelativeDifference(Value(out_classic.To(Device::CPU()), "d").ToFloats(),
                                                             Value(result->To(Device::CPU()), "d").ToFloats());
    }
    ways[name] = row;
  };
  record("classic", GraphUs(stream, [&]() -> absl::Status {
           SEAM_RETURN_IF_ERROR(kernels::ExpertMatmul(x, w.gate_up, groups, gu));
           SEAM_RETURN_IF_ERROR(kernels::SiluAndMul(gu, act));
           return kernels::ExpertMatmul(act, w.down, groups, out_classic);
         }),
         nullptr);
  for (auto [name, kernel] : {std::pair<const char*, kernels::ExpertKernel>{"gemv", kernels::ExpertKernel::kGemv},
                              {"tensor_core", kernels::ExpertKernel::kTensorCore}}) {
    if (!kernels::ExpertKernelTakes(kernel, dt, h) || !kernels::ExpertKernelTakes(kernel, dt, inter)) continue;
    record(name, GraphUs(stream, [&, kernel = kernel]() -> absl::Status {
             SEAM_RETURN_IF_ERROR(kernels::ExpertGateUpSilu(x, w.gate_up, groups, act, kernel));
             return kernels::ExpertDown(act, w.down, groups, out, kernel);
           }),
           &out);
  }
  record("per_expert", PerExpertUs(s, w, x, groups, gu, act, out), &out);
  const json around = AroundUs(s, rows, gpu_ids, groups, out, stream);
  return {{"rows", rows}, {"routing", routing}, {"pairs", pairs}, {"active_experts", active.size()},
          {"bytes", bytes}, {"flops", flops}, {"floor_us", floor_us}, {"ways", ways}, {"around", around},
          {"auto_kernel", kernels::ChooseExpertKernel(kernels::ExpertKernel::kAuto, dt, pairs) ==
                                  kernels::ExpertKernel::kGemv ? "gemv" : "tensor_core"}};
}

}  // namespace

int MoeKernelsBench(const Flags& flags) {
  const Shape4 s{flags.Int("hidden", 2048), flags.Int("moe-intermediate", 768), flags.Int("experts", 128),
                 flags.Int("top-k", 8), ParseDType(flags.Get("dtype", "bf16"))};
  const double copy_gbps = CopyGbps(size_t{1} << 30);
  const double peak = Bf16PeakTflops();
  const Layer w{StackedWeights(s.experts, 2 * s.inter, s.hidden, s.dtype, 1),
                StackedWeights(s.experts, s.hidden, s.inter, s.dtype, 2)};
  const CudaStream stream = Value(CudaStream::Create(kGpu), "stream");
  json cases = json::array();
  std::vector<models::internal::ExpertPathTiming> uniform;
  for (int64_t rows : flags.Ints("batches", "1,8,32,128,512,2048")) {
    for (absl::string_view routing : absl::StrSplit(flags.Get("routings", "uniform,skewed,hot"), ',')) {
      json c = Case(s, w, rows, std::string(routing), copy_gbps, peak, stream);
      std::cerr << "moe-kernels: " << rows << " rows, " << routing << ": " << c["ways"].dump() << "\n";
      const json& ways = c["ways"];
      const std::string fused_way = c["auto_kernel"];
      if (routing == "uniform" && ways.contains(fused_way)) {
        uniform.push_back({rows, ways[fused_way]["us"].get<double>(), ways["classic"]["us"].get<double>()});
      }
      cases.push_back(std::move(c));
    }
  }
  const models::internal::ExpertPathTable table =
      Value(models::internal::ExpertPathTable::FromTimings(uniform), "choice table");
  std::cerr << "moe-kernels: --moe-experts auto's choice from these uniform-routing times (fused = the auto "
               "kernel, grouped = classic; grouped kept when faster by more than "
            << 100 * models::internal::ExpertPathTable::kDefaultTieMargin << " %):\n"
            << table.ToString() << "\n";
  json choice = json::array();
  for (const auto& e : table.entries()) {
    choice.push_back({{"rows", e.timing.rows}, {"fused_us", e.timing.fused_us}, {"grouped_us", e.timing.grouped_us},
                      {"choice", models::internal::ExpertPathName(e.path)}});
  }
  WriteJson(flags, {{"hidden", s.hidden}, {"moe_intermediate", s.inter}, {"experts", s.experts},
                    {"top_k", s.top_k}, {"dtype", DTypeName(s.dtype)}, {"copy_gbps", copy_gbps},
                    {"bf16_peak_tflops", peak}, {"tensor_core_pairs", kernels::kTensorCorePairs}, {"cases", cases},
                    {"choice", choice},
                    {"note", "floor_us = max(bytes / copy_gbps, flops / bf16 peak); grouped ways graph-replayed, "
                             "per_expert eager without its host read of the offsets"}});
  return 0;
}

}  // namespace seam::bench
