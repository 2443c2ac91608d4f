// seam-bench-gpu mamba: a Nemotron-H checkpoint (seam model init --arch
// nemotron_h) on one GPU, each number against a floor measured in the same
// run from the device copy bandwidth:
//   decode   eager steps (what the server runs for nemotron_h: no decode
//            graph yet) at each batch, vs the bytes a step must move
//            (runtime's StepFloor): every weight once plus each sequence's
//            conv and SSM state read and written and its KV in the few
//            attention layers
//   kernels  the Mamba prefill ops alone at the model's shapes over
//            --scan-tokens tokens (one sequence, then --scan-seqs sequences
//            sharing them): the selective scan, the conv and the gated norm,
//            each with the bytes it must move and its rate against copy
//   prefill  the whole model over one sequence of --scan-tokens tokens
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

Loaded Load(const Flags& flags, DType dt) {
  Loaded l;
  l.checkpoint = Value(weights::Checkpoint::Open(flags.Get("checkpoint", "")), "checkpoint");
  models::ModelOptions options{Value(boundary::Topology::Make(1, 1, 0), "topology"), boundary::ReductionPolicy::kAr,
                               dt};
  options.device = kGpu;
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

// The prefill ops of one Mamba layer at the model's shapes over `tokens`
// tokens split into `seqs` equal sequences.
json Kernels(const weights::ModelConfig& c, DType dt, int64_t tokens, int64_t seqs, double copy_gbps) {
  const int64_t h = c.mamba_num_heads, p = c.mamba_head_dim, g = c.n_groups, n = c.ssm_state_size;
  const int64_t inner = c.mamba_intermediate(), conv = c.mamba_conv_dim(), k = c.conv_kernel;
  const double es = DTypeSize(dt);
  std::vector<int32_t> starts, slots;
  for (int64_t s = 0; s <= seqs; ++s) starts.push_back(static_cast<int32_t>(s * (tokens / seqs)));
  for (int64_t s = 0; s < seqs; ++s) slots.push_back(static_cast<int32_t>(s));
  kernels::SequenceStates sq{Value(Tensor::FromInts(starts, {seqs + 1}).To(kGpu), "upload"),
                             Value(Tensor::FromInts(slots, {seqs}).To(kGpu), "upload")};
  const int64_t t = starts.back();
  kernels::SelectiveScanParams sp;
  sp.x = RandomGpu({t, h, p}, dt, 1);
  sp.dt = RandomGpu({t, h}, dt, 2);
  sp.b = RandomGpu({t, g, n}, dt, 3);
  sp.c = RandomGpu({t, g, n}, dt, 4);
  sp.dt_bias = RandomGpu({h}, DType::kF32, 5);
  // A = -0.5: decays below one, so the state stays finite over long sequences.
  sp.a = Value(Tensor::FromFloats(std::vector<float>(static_cast<size_t>(h), -0.5f), {h}).To(kGpu), "upload");
  sp.d = RandomGpu({h}, DType::kF32, 7);
  sp.ssm_state = Tensor::Zeros({seqs, h, p, n}, DType::kF32, kGpu);
  sp.seqs = sq;
  sp.out = Tensor::Empty({t, h, p}, dt, kGpu);
  const double scan_bytes = (2.0 * t * h * p + t * h + 2.0 * t * g * n) * es + 2.0 * seqs * h * p * n * 4;
  const double scan_us = TimeUs([&] { Check(kernels::SelectiveScan(sp), "scan"); }, 5, 1);

  const Tensor xbc = RandomGpu({t, conv}, dt, 8), conv_out = Tensor::Empty({t, conv}, dt, kGpu);
  const Tensor taps = RandomGpu({conv, k}, DType::kF32, 9, 0.5f), bias = RandomGpu({conv}, DType::kF32, 10);
  const Tensor conv_state = Tensor::Zeros({seqs, k - 1, conv}, DType::kF32, kGpu);
  const double conv_bytes = 2.0 * t * conv * es;
  const double conv_us =
      TimeUs([&] { Check(kernels::CausalConv1d(xbc, taps, bias, true, conv_state, sq, conv_out), "conv"); }, 10, 2);

  const Tensor y = RandomGpu({t, inner}, dt, 11), z = RandomGpu({t, inner}, dt, 12);
  const Tensor w = RandomGpu({inner}, dt, 13), normed = Tensor::Empty({t, inner}, dt, kGpu);
  const double norm_bytes = 3.0 * t * inner * es;
  const double norm_us =
      TimeUs([&] { Check(kernels::GatedRmsNorm(y, z, w, inner / g, 1e-5f, normed), "gated norm"); }, 10, 2);

  auto row = [&](const char* name, double bytes, double us) {
    const double floor_us = bytes / copy_gbps / 1e3;
    return json{{"op", name}, {"bytes", bytes}, {"us", us}, {"gbps", bytes / us / 1e3}, {"floor_us", floor_us},
                {"floor_ratio", us / floor_us}};
  };
  return {{"tokens", t}, {"sequences", seqs}, {"tokens_per_s_scan", t / (scan_us * 1e-6)},
          {"ops", {row("selective_scan", scan_bytes, scan_us), row("causal_conv1d", conv_bytes, conv_us),
                   row("gated_rms_norm", norm_bytes, norm_us)}}};
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
  Loaded l = Load(flags, dt);
  const weights::ModelConfig& c = l.model->config();
  if (c.hybrid_override_pattern.empty()) {
    std::cerr << "seam-bench-gpu mamba: --checkpoint must be a nemotron_h checkpoint\n";
    return 2;
  }
  const double copy_gbps = CopyGbps(size_t{1} << 30);
  const int64_t tokens = flags.Int("scan-tokens", 8192), seqs = flags.Int("scan-seqs", 8);
  uint64_t next_id = 0;
  json out{{"pattern", c.hybrid_override_pattern}, {"hidden", c.hidden_size}, {"dtype", DTypeName(dt)},
           {"copy_gbps", copy_gbps}};
  out["decode"] = Decode(flags, l, copy_gbps, next_id);
  out["kernels"] = json::array({Kernels(c, dt, tokens, 1, copy_gbps), Kernels(c, dt, tokens, seqs, copy_gbps)});
  out["prefill"] = Prefill(l, tokens, next_id);
  out["note"] = "floors: bytes / copy_gbps (device copy traffic, read + write, measured here); decode is eager";
  WriteJson(flags, out);
  return 0;
}

}  // namespace seam::bench
