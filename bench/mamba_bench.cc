// seam-bench-gpu mamba: a Nemotron-H checkpoint (seam model init --arch
// nemotron_h) on one GPU, each number against a floor measured in the same
// run from the device copy bandwidth and the bf16 matmul peak:
//   decode   eager steps at each batch, vs the bytes a step must move
//            (runtime's StepFloor): every weight once plus each sequence's
//            conv and SSM state read and written and its KV in the few
//            attention layers
//   kernels  the Mamba prefill ops alone at the model's shapes over
//            --scan-tokens tokens (one sequence, then --scan-seqs sequences
//            sharing them): the selective scan sequential and chunked (at
//            chunks 32 and 64), the conv and the gated norm, each with the
//            bytes it must move (and the chunked scan its matmul FLOPs), its
//            floor max(bytes / copy, FLOPs / peak) and its ratio to it
//   decode_scan  the scan's one-token step alone at each batch (the
//            sequential kernel decode runs), vs its state bytes
//   prefill  the whole model over one sequence of --scan-tokens tokens, with
//            --mamba-scan sequential (the earlier kernel) and auto (chunked)
#include <cuda_runtime_api.h>

#include <chrono>
#include <vector>

#include "gpu_bench_util.h"
#include "seam/core/device_memory.h"
#include "seam/models/decoder_model.h"
#include "seam/runtime/step_floor.h"
#include "seam/weights/checkpoint.h"

namespace seam::bench {
namespace {

using models::SequenceStep;
using models::StepInput;

struct Loaded {
  std::unique_ptr<weights::Checkpoint> checkpoint;
  std::unique_ptr<models::DecoderModel> model;
  std::unique_ptr<models::KvCache> cache;
};

Loaded Load(const Flags& flags, DType dt, kernels::ScanAlgorithm scan = kernels::ScanAlgorithm::kAuto) {
  Loaded l;
  l.checkpoint = Value(weights::Checkpoint::Open(flags.Get("checkpoint", "")), "checkpoint");
  models::ModelOptions options{Value(boundary::Topology::Make(1, 1, 0), "topology"), boundary::ReductionPolicy::kAr,
                               dt};
  options.device = kGpu;
  options.mamba_scan = scan;
  l.model = Value(models::LoadDecoderModel(*l.checkpoint, options), "load");
  models::KvCacheOptions cache;
  cache.budget_bytes = flags.Int("cache-mib", 4096) << 20;
  cache.dtype = dt;
  cache.max_state_sequences = flags.Int("state-sequences", 40);
  l.cache = Value(l.model->MakeCache(cache), "cache");
  return l;
}

absl::StatusOr<Tensor> Forward(Loaded& l, const StepInput& input) {
  int64_t rows = 0;
  for (const SequenceStep& s : input.sequences) rows += static_cast<int64_t>(s.tokens.size());
  boundary::ForwardBatch batch(0, boundary::BatchVariant::kOrdinary, l.model->options().topology, {rows});
  return l.model->Forward(batch, input, *l.cache);
}

json Decode(const Flags& flags, Loaded& l, double copy_gbps, uint64_t& next_id) {
  const weights::ModelConfig& c = l.model->config();
  const int64_t prompt = flags.Int("prompt-len", 128), steps = flags.Int("steps", 32);
  runtime::StepFloorOptions floor_options;
  floor_options.weight_dtype = floor_options.cache_dtype = l.model->options().dtype;
  const runtime::StepFloor floor = runtime::StepFloor::Of(c, floor_options);
  const int64_t context = prompt + (steps + 1) / 2;  // the mean timed step's
  const double weight_bytes = floor.DecodeStep(1, 0).weights, state = floor.state_bytes_per_sequence();
  json rows = json::array();
  for (int64_t b : flags.Ints("batches", "1,32")) {
    StepInput prefill{{}, false};
    const uint64_t first = next_id;
    for (int64_t i = 0; i < b; ++i) {
      prefill.sequences.push_back(SequenceStep{next_id++, RandomTokens(100 + i, prompt, c.vocab_size), 0});
    }
    std::vector<int32_t> last = ArgmaxToHost(Value(Forward(l, prefill), "prefill"));
    auto start = std::chrono::steady_clock::now();
    for (int64_t s = 0; s < steps; ++s) {
      StepInput step{{}, false};
      for (int64_t i = 0; i < b; ++i) step.sequences.push_back(SequenceStep{first + i, {last[i]}, prompt + s});
      last = ArgmaxToHost(Value(Forward(l, step), "decode step"));
    }
    const double ms = 1e3 * Seconds(start) / steps;
    for (int64_t i = 0; i < b; ++i) Check(l.cache->Free(first + i), "free");
    const double bytes = floor.DecodeStep(b, b * context).total();  // the state is read and written back
    const double floor_ms = bytes / copy_gbps / 1e6;
    rows.push_back({{"batch", b}, {"eager_ms_per_step", ms}, {"tokens_per_s", b * 1e3 / ms},
                    {"bytes_per_step", bytes}, {"floor_ms", floor_ms}, {"floor_ratio", ms / floor_ms}});
  }
  return {{"weight_bytes", weight_bytes}, {"state_bytes_per_sequence", state}, {"prompt_len", prompt},
          {"steps", steps}, {"results", rows}};
}

struct Peaks {
  double copy_gbps, tflops;
};

// One op's row: its time against max(bytes / copy, flops / peak).
json OpRow(const std::string& name, double bytes, double flops, double us, const Peaks& peaks) {
  const double floor_us = std::max(bytes / peaks.copy_gbps / 1e3, flops / peaks.tflops / 1e6);
  return json{{"op", name}, {"bytes", bytes}, {"flops", flops}, {"us", us}, {"gbps", bytes / us / 1e3},
              {"floor_us", floor_us}, {"floor_ratio", us / floor_us}};
}

// Scan inputs of one Mamba layer's shapes: `seqs` sequences of `len` tokens.
kernels::SelectiveScanParams ScanInputs(const weights::ModelConfig& c, DType dt, int64_t seqs, int64_t len) {
  const int64_t h = c.mamba_num_heads, p = c.mamba_head_dim, g = c.n_groups, n = c.ssm_state_size;
  std::vector<int32_t> starts, slots;
  for (int64_t s = 0; s <= seqs; ++s) starts.push_back(static_cast<int32_t>(s * len));
  for (int64_t s = 0; s < seqs; ++s) slots.push_back(static_cast<int32_t>(s));
  const int64_t t = seqs * len;
  kernels::SelectiveScanParams sp;
  sp.seqs = {Value(Tensor::FromInts(starts, {seqs + 1}).To(kGpu), "upload"),
             Value(Tensor::FromInts(slots, {seqs}).To(kGpu), "upload")};
  sp.x = RandomGpu({t, h, p}, dt, 1);
  sp.dt = RandomGpu({t, h}, dt, 2);
  sp.b = RandomGpu({t, g, n}, dt, 3);
  sp.c = RandomGpu({t, g, n}, dt, 4);
  sp.dt_bias = RandomGpu({h}, DType::kF32, 5);
  // A = -0.5: decays below one, so the state stays finite over long sequences.
  sp.a = Value(Tensor::FromFloats(std::vector<float>(static_cast<size_t>(h), -0.5f), {h}).To(kGpu), "upload");
  sp.d = RandomGpu({h}, DType::kF32, 7);
  sp.ssm_state = Tensor::Zeros({seqs, h, p, n}, DType::kF32, kGpu);
  sp.out = Tensor::Empty({t, h, p}, dt, kGpu);
  return sp;
}

// The prefill ops of one Mamba layer at the model's shapes over `tokens`
// tokens split into `seqs` equal sequences.
json Kernels(const weights::ModelConfig& c, DType dt, int64_t tokens, int64_t seqs, const Peaks& peaks) {
  const int64_t h = c.mamba_num_heads, p = c.mamba_head_dim, g = c.n_groups, n = c.ssm_state_size;
  const int64_t inner = c.mamba_intermediate(), conv = c.mamba_conv_dim(), k = c.conv_kernel;
  const double es = DTypeSize(dt);
  kernels::SelectiveScanParams sp = ScanInputs(c, dt, seqs, tokens / seqs);
  const kernels::SequenceStates sq = sp.seqs;
  const int64_t t = sp.x.dim(0);
  const double scan_bytes = (2.0 * t * h * p + t * h + 2.0 * t * g * n) * es + 2.0 * seqs * h * p * n * 4;
  json ops = json::array();
  sp.algorithm = kernels::ScanAlgorithm::kSequential;
  std::vector<float> sequential_out;
  ops.push_back(OpRow("selective_scan_sequential", scan_bytes, 0,
                      TimeUs([&] { Check(kernels::SelectiveScan(sp), "scan"); }, 3, 1), peaks));
  sequential_out = Value(sp.out.To(Device::CPU()), "download").ToFloats();
  if (kernels::ChunkedScanTakes(dt, p, n)) {
    for (int64_t chunk : {32, 64}) {
      sp.algorithm = kernels::ScanAlgorithm::kChunked;
      sp.chunk = chunk;
      // The chunked form's matmuls: C·Bᵀ per group and chunk, M·x, C·hᵀ and the state update per head.
      const double flops = static_cast<double>(t) * (2.0 * g * chunk * n + h * (2.0 * chunk * p + 4.0 * p * n));
      json row = OpRow("selective_scan_chunked_" + std::to_string(chunk), scan_bytes, flops,
                       TimeUs([&] { Check(kernels::SelectiveScan(sp), "scan"); }, 10, 2), peaks);
      row["max_rel_diff_vs_sequential"] =
          MaxRelativeDifference(sequential_out, Value(sp.out.To(Device::CPU()), "download").ToFloats());
      ops.push_back(row);
    }
  }

  const Tensor xbc = RandomGpu({t, conv}, dt, 8), conv_out = Tensor::Empty({t, conv}, dt, kGpu);
  const Tensor taps = RandomGpu({conv, k}, DType::kF32, 9, 0.5f), bias = RandomGpu({conv}, DType::kF32, 10);
  const Tensor conv_state = Tensor::Zeros({seqs, k - 1, conv}, DType::kF32, kGpu);
  ops.push_back(OpRow("causal_conv1d", 2.0 * t * conv * es, 0,
                      TimeUs([&] { Check(kernels::CausalConv1d(xbc, taps, bias, true, conv_state, sq, conv_out),
                                         "conv"); }, 10, 2),
                      peaks));
  const Tensor y = RandomGpu({t, inner}, dt, 11), z = RandomGpu({t, inner}, dt, 12);
  const Tensor w = RandomGpu({inner}, dt, 13), normed = Tensor::Empty({t, inner}, dt, kGpu);
  ops.push_back(OpRow("gated_rms_norm", 3.0 * t * inner * es, 0,
                      TimeUs([&] { Check(kernels::GatedRmsNorm(y, z, w, inner / g, 1e-5f, normed), "norm"); }, 10, 2),
                      peaks));
  return {{"tokens", t}, {"sequences", seqs}, {"ops", ops}};
}

// The scan's decode step (one token a sequence, the sequential kernel) at each batch, vs its bytes.
json DecodeScan(const weights::ModelConfig& c, DType dt, const std::vector<int64_t>& batches, const Peaks& peaks) {
  const int64_t h = c.mamba_num_heads, p = c.mamba_head_dim, g = c.n_groups, n = c.ssm_state_size;
  json rows = json::array();
  for (int64_t b : batches) {
    kernels::SelectiveScanParams sp = ScanInputs(c, dt, b, 1);
    const double bytes = (2.0 * b * h * p + b * h + 2.0 * b * g * n) * DTypeSize(dt) + 2.0 * b * h * p * n * 4;
    json row = OpRow("selective_scan_decode", bytes, 0,
                     TimeUs([&] { Check(kernels::SelectiveScan(sp), "scan"); }, 50, 5), peaks);
    row["batch"] = b;
    rows.push_back(row);
  }
  return rows;
}

json Prefill(Loaded& l, int64_t tokens, uint64_t& next_id) {
  double best_ms = 1e30;
  for (int r = 0; r < 3; ++r) {  // the first run warms up
    StepInput input{{SequenceStep{next_id++, RandomTokens(7 + r, tokens, l.model->config().vocab_size), 0}}, false};
    Check(SEAM_CUDA_STATUS(cudaDeviceSynchronize()), "sync");
    auto start = std::chrono::steady_clock::now();
    Value(Forward(l, input), "prefill");
    Check(SEAM_CUDA_STATUS(cudaDeviceSynchronize()), "sync");
    if (r > 0) best_ms = std::min(best_ms, 1e3 * Seconds(start));
    Check(l.cache->Free(input.sequences[0].sequence), "free");
  }
  return {{"tokens", tokens}, {"ms", best_ms}, {"tokens_per_s", tokens / (best_ms * 1e-3)}};
}

}  // namespace

int MambaBench(const Flags& flags) {
  const DType dt = ParseDType(flags.Get("dtype", "bf16"));
  const Peaks peaks{CopyGbps(size_t{1} << 30), Bf16PeakTflops()};
  const int64_t tokens = flags.Int("scan-tokens", 8192), seqs = flags.Int("scan-seqs", 8);
  uint64_t next_id = 0;
  json out;
  json prefill = json::object();
  using kernels::ScanAlgorithm;
  for (auto [name, scan] : {std::pair<const char*, ScanAlgorithm>{"sequential", ScanAlgorithm::kSequential},
                            {"auto", ScanAlgorithm::kAuto}}) {
    Loaded l = Load(flags, dt, scan);
    const weights::ModelConfig& c = l.model->config();
    if (c.hybrid_override_pattern.empty()) {
      std::cerr << "seam-bench-gpu mamba: --checkpoint must be a nemotron_h checkpoint\n";
      return 2;
    }
    if (scan == ScanAlgorithm::kAuto) {  // decode runs the sequential kernel either way: once
      out = {{"pattern", c.hybrid_override_pattern}, {"hidden", c.hidden_size}, {"dtype", DTypeName(dt)},
             {"copy_gbps", peaks.copy_gbps}, {"bf16_peak_tflops", peaks.tflops}};
      out["decode"] = Decode(flags, l, peaks.copy_gbps, next_id);
      out["kernels"] = json::array({Kernels(c, dt, tokens, 1, peaks), Kernels(c, dt, tokens, seqs, peaks)});
      out["decode_scan"] = DecodeScan(c, dt, flags.Ints("batches", "1,32"), peaks);
    }
    prefill[name] = Prefill(l, tokens, next_id);
  }
  prefill["speedup"] = prefill["sequential"]["ms"].get<double>() / prefill["auto"]["ms"].get<double>();
  out["prefill"] = prefill;
  out["note"] = "floors: max(bytes / copy_gbps, FLOPs / bf16_peak_tflops), both measured here; decode is eager";
  WriteJson(flags, out);
  return 0;
}

}  // namespace seam::bench
