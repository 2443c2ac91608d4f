// seam-bench-gpu: seam's GPU numbers on one device, each against a baseline
// measured in the same run (bench/gpu/README.md says how they are reported).
//
//   norm     fused add+RMSNorm vs a device-to-device copy of the same traffic
//   decode   decode steps at several batch sizes, eager, CUDA graph (each
//            step's tokens through the host) and graph fed on the device (the
//            server's multi-step decode), vs the weights + KV bytes /
//            copy-bandwidth floor (runtime's StepFloor)
//   prefill  prefill throughput and its matmul rate vs the bf16 matmul peak
//            measured here
//   profile  each op of a decode step (or a prefill) alone at the model's
//            shapes, eager and replayed from a CUDA graph: where a step's time goes,
//            each op beside its floor (the matmuls: max(bytes / copy bandwidth,
//            FLOPs / bf16 matmul peak); norms, attention, SiLU, argmax: bytes),
//            and the kernel Matmul chose for each shape
//   logits   prefill logits and greedy decode of given prompts, for the oracle
//            that compares them with transformers (tools/gpu_oracle.py)
//   mamba    a Nemotron-H checkpoint: decode steps vs the weight + state bytes
//            floor, the scan kernels (sequential and chunked) vs their bytes
//            and FLOPs, and the prefill with each (mamba_bench.cc)
//   moe-kernels  one MoE layer's expert kernels alone, old and new, at decode
//            and prefill batch sizes and three routings, vs their bytes and
//            FLOPs (moe_kernels_bench.cc)
//   tbo      two GPUs: a Qwen3-MoE prefill (2 x 4096 tokens) at TP 2 with and
//            without two-batch overlap, and the time in collectives without
//            it (tbo_bench.cc)
//   cp       one prompt of 32768 tokens prefilled at CP 1 (one GPU) and at
//            CP 2 (two GPUs, context-parallel): the speedup and the last
//            row's logits against each other (cp_bench.cc)
//   attention  PagedAttention alone (decode rows; mixed steps) vs the floor
//            of its KV bytes at copy bandwidth (attention_bench.cc)
//   latent-attention  PagedLatentAttention decode (multi-head latent
//            attention) vs its bytes at copy bandwidth and its FLOPs at the
//            bf16 matmul rate (latent_attention_bench.cc)
//   matmul   the decode step's matmuls at decode batch sizes, cuBLASLt's
//            first pick and autotuned, vs max(bytes, FLOPs) (decode_kernels_bench.cc)
//   argmax   greedy argmax over batch x vocabulary logits vs its bytes
//
// Every mode takes --matmul-candidates N (1: cuBLASLt's first pick, untimed)
// and --matmul-max-tuned-rows M (seam/kernels/matmul_tuning.h), and --pdl
// on|off (programmatic dependent launch of the decode kernels,
// seam/kernels/programmatic_launch.h; default off). decode also takes
// --pdl both: the graph and fed steps run with it on, then again with it off
// (captured again), and each row reports the fed steps' off / on ratio.
//
// Usage: seam-bench-gpu <norm|decode|prefill|profile|logits|allreduce-norm|mamba|moe-kernels|tbo|cp|attention|
//                        latent-attention|matmul|argmax> [--flag value]...
#include <cuda_runtime_api.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <optional>
#include <iostream>
#include <map>
#include <random>
#include <thread>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "gpu_bench_util.h"
#include "seam/core/cuda_check.h"
#include "seam/core/cuda_graph.h"
#include "seam/core/device_memory.h"
#include "seam/core/status.h"
#include "seam/kernels/matmul_tuning.h"
#include "seam/kernels/moe_experts.h"
#include "seam/kernels/ops.h"
#include "seam/kernels/programmatic_launch.h"
#include "seam/kernels/stream.h"
#include "seam/runtime/decode_graph.h"
#include "seam/runtime/measured_peaks.h"
#include "seam/runtime/step_floor.h"
#include "seam/models/decoder_model.h"
#include "seam/weights/checkpoint.h"
#include "seam/weights/model_config.h"

namespace seam::bench {
namespace {

using json = nlohmann::json;
using models::SequenceStep;
using models::StepInput;

int Norm(const Flags& flags) {
  json out = json::array();
  const DType dt = DType::kBF16;
  for (int64_t hidden : {4096, 8192}) {
    for (int64_t rows : {1, 16, 256, 4096, 32768}) {
      const Tensor x = RandomGpu({rows, hidden}, dt, 1), res = RandomGpu({rows, hidden}, dt, 2);
      const Tensor w = RandomGpu({hidden}, dt, 3), o = Tensor::Empty({rows, hidden}, dt, kGpu);
      const size_t traffic = 4 * rows * hidden * DTypeSize(dt);  // read x, residual; write residual, out
      const int iters = static_cast<int>(std::clamp<size_t>((size_t{20} << 30) / traffic, 50, 2000));
      const double fused = TimeUs([&] { Check(kernels::FusedAddRmsNorm(x, res, w, 1e-6f, o), "norm"); }, iters);
      // The same traffic as a copy: 2·rows·hidden elements read and written.
      Tensor src = Tensor::Empty({2 * rows, hidden}, dt, kGpu), dst = Tensor::Empty({2 * rows, hidden}, dt, kGpu);
      const double copy = TimeUs([&] { Check(CopyInto(src, dst), "copy"); }, iters);
      out.push_back({{"rows", rows}, {"hidden", hidden}, {"dtype", "bf16"}, {"bytes", traffic},
                     {"fused_us", fused}, {"fused_gbps", traffic / fused / 1e3}, {"copy_us", copy},
                     {"copy_gbps", traffic / copy / 1e3}, {"ratio", copy / fused}});
    }
  }
  WriteJson(flags, out);
  return 0;
}

struct Model {
  std::unique_ptr<weights::Checkpoint> checkpoint;
  std::unique_ptr<models::DecoderModel> model;  // the architecture the checkpoint names
  std::unique_ptr<models::KvCache> cache;
};

Model LoadModel(const Flags& flags, int64_t cache_bytes) {
  Model m;
  m.checkpoint = Value(weights::Checkpoint::Open(flags.Get("checkpoint", "")), "checkpoint");
  models::ModelOptions options{Value(boundary::Topology::Make(1, 1, 0), "topology"), boundary::ReductionPolicy::kAr,
                               ParseDType(flags.Get("dtype", "bf16"))};
  options.device = kGpu;
  options.moe_experts = Value(models::ParseMoeExperts(flags.Get("moe-experts", "auto")), "--moe-experts");
  m.model = Value(models::LoadDecoderModel(*m.checkpoint, options), "load");
  models::KvCacheOptions cache;
  cache.budget_bytes = cache_bytes;
  cache.dtype = options.dtype;
  m.cache = Value(m.model->MakeCache(cache), "cache");
  return m;
}

absl::StatusOr<Tensor> Forward(Model& m, const StepInput& input) {
  int64_t rows = 0;
  for (const SequenceStep& s : input.sequences) rows += static_cast<int64_t>(s.tokens.size());
  boundary::ForwardBatch batch(0, boundary::BatchVariant::kOrdinary, m.model->options().topology, {rows});
  return m.model->Forward(batch, input, *m.cache);
}

// `steps` decode steps of sequences first.. first + b - 1 at positions
// prompt.., the first step's tokens `last`, replayed from `graph` with each
// step's tokens fed on the device from the previous step's argmax, nothing
// read on the host until the end: the tokens chosen, step after step.
std::vector<int32_t> FedSteps(runtime::DecodeGraph& graph, uint64_t first, int64_t b, int64_t prompt, int64_t steps,
                              const std::vector<int32_t>& last) {
  kernels::ScopedStream on(graph.stream().handle());
  Tensor history = Tensor::Empty({steps + 1, b}, DType::kI32, kGpu);
  Check(CopyInto(Value(Tensor::FromInts(last, {1, b}).To(kGpu), "upload"), history.Rows(0, 1)), "first tokens");
  for (int64_t s = 0; s < steps; ++s) {
    StepInput step{{}, false};
    for (int64_t i = 0; i < b; ++i) step.sequences.push_back(SequenceStep{first + i, {0}, prompt + s});
    const Tensor fed = Value(history.Rows(s, 1).Reshape({b}), "fed ids");
    runtime::DecodeGraphOutput out = Value(graph.Replay(step, nullptr, &fed), "fed step");
    Check(kernels::Argmax(out.logits, Value(history.Rows(s + 1, 1).Reshape({b}), "ids")), "argmax");
  }
  Tensor host = Value(history.Rows(1, steps).To(Device::CPU()), "download");
  return std::vector<int32_t>(host.data<int32_t>(), host.data<int32_t>() + host.numel());
}

// The same steps with each step's tokens read on the host before the next
// step is built: eager (graph null) or replayed from `graph`.
std::vector<int32_t> HostSteps(Model& m, runtime::DecodeGraph* graph, uint64_t first, int64_t b, int64_t prompt,
                               int64_t steps, std::vector<int32_t> last) {
  std::vector<int32_t> generated;
  for (int64_t s = 0; s < steps; ++s) {
    StepInput step{{}, false};
    for (int64_t i = 0; i < b; ++i) step.sequences.push_back(SequenceStep{first + i, {last[i]}, prompt + s});
    if (graph != nullptr) {
      kernels::ScopedStream on(graph->stream().handle());
      last = ArgmaxToHost(Value(graph->Step(step), "graph step"));
    } else {
      last = ArgmaxToHost(Value(Forward(m, step), "eager step"));
    }
    generated.insert(generated.end(), last.begin(), last.end());
  }
  return generated;
}

// A decode row's graph figures: variants 1 (graph) and 2 (fed) of Decode,
// and with `pdl_both` 3 and 4, the same with programmatic dependent launch off.
void AddGraphResults(json& row, int64_t b, const double* ms, const std::vector<std::vector<int32_t>>& generated,
                     double batch_floor_ms, bool pdl_both) {
  row["graph_ms_per_step"] = ms[1];
  row["graph_tokens_per_s"] = b * 1e3 / ms[1];
  row["floor_ratio"] = ms[1] / batch_floor_ms;
  row["graph_tokens_equal_eager"] = generated[0] == generated[1];
  row["graph_fed_ms_per_step"] = ms[2];
  row["graph_fed_floor_ratio"] = ms[2] / batch_floor_ms;
  row["graph_fed_tokens_equal_eager"] = generated[0] == generated[2];
  if (!pdl_both) return;
  row["pdl_off_graph_ms_per_step"] = ms[3];
  row["pdl_off_graph_fed_ms_per_step"] = ms[4];
  row["pdl_off_graph_fed_floor_ratio"] = ms[4] / batch_floor_ms;
  row["pdl_fed_speedup"] = ms[4] / ms[2];  // off / on: above 1 where PDL helps
  row["pdl_off_tokens_equal_pdl_on"] = generated[3] == generated[1] && generated[4] == generated[2];
}

int Decode(const Flags& flags) {
  const int64_t prompt = flags.Int("prompt-len", 128), steps = flags.Int("steps", 64);
  Model m = LoadModel(flags, flags.Int("cache-mib", 6144) << 20);
  const weights::ModelConfig& c = m.model->config();
  const double copy_gbps = CopyGbps(size_t{1} << 30);
  runtime::StepFloorOptions floor_options;
  floor_options.weight_dtype = floor_options.cache_dtype = m.model->options().dtype;
  const runtime::StepFloor floor = runtime::StepFloor::Of(c, floor_options);
  const double weight_bytes = floor.DecodeStep(1, 0).weights;
  const double floor_ms = weight_bytes / copy_gbps / 1e6;
  // The timed steps feed positions prompt .. prompt + steps - 1: the mean step attends this many tokens.
  const int64_t context = prompt + (steps + 1) / 2;
  json results = json::array();
  uint64_t next_id = 0;
  const bool pdl_both = flags.Get("pdl", "off") == "both";
  for (int64_t b : flags.Ints("batches", "1,8,64")) {
    std::vector<std::vector<int32_t>> generated(5);
    double ms[5] = {0, 0, 0, 0, 0};
    // A step the model cannot record (MoE experts run one by one) runs eagerly only.
    const bool can_graph = b <= m.model->graph_max_rows();
    // 0 eager, 1 graph (each step's tokens through the host), 2 graph fed on
    // the device (the server's multi-step decode: the next step is enqueued
    // before this one's tokens are read); with --pdl both, 3 and 4 are 1 and
    // 2 captured with programmatic dependent launch off.
    const int variants = can_graph ? (pdl_both ? 5 : 3) : 1;
    for (int variant = 0; variant < variants; ++variant) {
      const int graphed = variant > 2 ? variant - 2 : variant;
      if (pdl_both) kernels::SetProgrammaticLaunch(variant <= 2);
      StepInput prefill{{}, false};
      const uint64_t first = next_id;
      for (int64_t i = 0; i < b; ++i) {
        prefill.sequences.push_back(SequenceStep{next_id++, RandomTokens(100 + i, prompt, c.vocab_size), 0});
      }
      std::vector<int32_t> last = ArgmaxToHost(Value(Forward(m, prefill), "prefill"));
      std::unique_ptr<runtime::DecodeGraph> graph;
      if (graphed) {
        graph = Value(runtime::DecodeGraph::Capture(*m.model, *m.cache, b, prompt + steps + 1), "capture");
      }
      auto start = std::chrono::steady_clock::now();
      generated[variant] = graphed == 2 ? FedSteps(*graph, first, b, prompt, steps, last)
                                        : HostSteps(m, graph.get(), first, b, prompt, steps, last);
      ms[variant] = 1e3 * Seconds(start) / steps;
      for (int64_t i = 0; i < b; ++i) Check(m.cache->Free(first + i), "free");
    }
    const runtime::DecodeStepBytes bytes = floor.DecodeStep(b, b * context);
    const double batch_floor_ms = bytes.total() / copy_gbps / 1e6;
    json row = {{"batch", b}, {"context", context}, {"eager_ms_per_step", ms[0]}, {"eager_tokens_per_s", b * 1e3 / ms[0]},
                {"floor_bytes", bytes.total()}, {"floor_kv_bytes", bytes.kv}, {"floor_ms", batch_floor_ms}};
    if (c.num_experts > 0) {  // what the floor counts per MoE layer, under uniform routing
      row["floor_routed_experts_per_layer"] =
          runtime::ExpectedRoutedExpertsTouched(c.num_experts, c.zero_expert_num, c.num_experts_per_tok, b);
      row["floor_expert_bytes"] = bytes.experts;
    }
    if (can_graph) {
      AddGraphResults(row, b, ms, generated, batch_floor_ms, pdl_both);
    } else {
      row["floor_ratio"] = ms[0] / batch_floor_ms;
      row["eager_only"] = m.model->graph_max_rows() < 1
                              ? "the model records no CUDA graph (its MoE layers run their experts one by one): eager steps"
                              : "batch above the rows the model records: eager steps";
    }
    results.push_back(row);
  }
  if (pdl_both) kernels::SetProgrammaticLaunch(true);
  WriteJson(flags, {{"copy_gbps", copy_gbps}, {"weight_bytes", weight_bytes}, {"floor_ms", floor_ms},
                    {"kv_bytes_per_token", floor.kv_bytes_per_token()}, {"prompt_len", prompt}, {"steps", steps},
                    {"pdl", flags.Get("pdl", "off")},
                    {"architecture", c.architecture}, {"graph_max_rows", m.model->graph_max_rows()},
                    {"note", "floor_ms of a row: weights (the routed experts a batch touches under uniform routing "
                             "over the routed and zero experts; zero experts read nothing) + every sequence's KV "
                             "(LongCat-Flash: its latent rows) over the mean step's context, at copy_gbps; floor_ms "
                             "at the top: weights alone"},
                    {"results", results}});
  return 0;
}

int Prefill(const Flags& flags) {
  const int64_t seqs = flags.Int("seqs", 8), len = flags.Int("len", 1024), repeats = flags.Int("repeats", 5);
  Model m = LoadModel(flags, flags.Int("cache-mib", 4096) << 20);
  const weights::ModelConfig& c = m.model->config();
  const DType dt = m.model->options().dtype;
  const int64_t tokens = seqs * len;
  // seam's best matmul: a square one and the prefill's shapes, each timed alone.
  const runtime::MatmulPeak peak = Value(runtime::BestMatmulFlopsPerSecond(kGpu, dt, c, tokens), "matmul peak");
  json shape_rates = json::array();
  for (const auto& [s, rate] : peak.rates) {
    if (std::string(s.name) == "square") continue;
    shape_rates.push_back({{"name", s.name}, {"m", s.m}, {"n", s.n}, {"k", s.k}, {"tflops", rate / 1e12}});
  }
  runtime::StepFloorOptions floor_options;
  floor_options.weight_dtype = floor_options.cache_dtype = dt;
  // Matmul FLOPs of one prefill (lm_head on the last rows only).
  const double flops = seqs * runtime::StepFloor::Of(c, floor_options).Prefill(len).matmul;
  double best_ms = 1e30;
  uint64_t id = 0;
  for (int64_t r = 0; r < repeats + 1; ++r) {
    StepInput input{{}, false};
    for (int64_t i = 0; i < seqs; ++i) input.sequences.push_back(SequenceStep{id++, RandomTokens(i, len, c.vocab_size), 0});
    Check(SEAM_CUDA_STATUS(cudaDeviceSynchronize()), "sync");
    auto start = std::chrono::steady_clock::now();
    Tensor logits = Value(Forward(m, input), "prefill");
    Check(SEAM_CUDA_STATUS(cudaDeviceSynchronize()), "sync");
    if (r > 0) best_ms = std::min(best_ms, 1e3 * Seconds(start));  // the first run warms up
    for (const SequenceStep& s : input.sequences) Check(m.cache->Free(s.sequence), "free");
  }
  const double in_prefill = flops / (best_ms * 1e-3) / 1e12;
  WriteJson(flags, {{"tokens", tokens}, {"ms", best_ms}, {"tokens_per_s", tokens / (best_ms * 1e-3)},
                    {"matmul_tflops_peak", peak.flops_per_s / 1e12}, {"matmul_shapes", shape_rates},
                    {"matmul_tflops_in_prefill", in_prefill},
                    {"matmul_fraction", in_prefill / (peak.flops_per_s / 1e12)},
                    {"note", "matmul_tflops_in_prefill = matmul FLOPs / whole prefill time (attention, norms "
                             "and the rest included), a lower bound on the matmuls' own rate"}});
  return 0;
}


// Mean microseconds per call of `body` replayed from a CUDA graph of 20 calls.
double GraphUs(const std::function<void()>& body) {
  CudaStream stream = Value(CudaStream::Create(kGpu), "stream");
  kernels::ScopedStream on(stream.handle());
  body();  // warm-up outside the capture
  Check(stream.Synchronize(), "sync");
  return Value(GraphReplayUs(stream, [&] {
                 body();
                 return absl::OkStatus();
               }, 20),
               "capture");
}

// One op of a decode step, timed alone, with what its floor counts (0: no floor stated).
struct ProfiledOp {
  const char* name;
  int per_layer;  // calls per decoder layer (0: once per step)
  std::function<void()> body;
  double bytes = 0;  // bytes it must move (read once, written once)
  double flops = 0;  // its matmul FLOPs
};

// out = x · wᵀ as a profiled op: its bytes are x, w and out, its FLOPs 2 m n k.
ProfiledOp MatmulOp(const char* name, int per_layer, const Tensor& x, const Tensor& w, const Tensor& out) {
  return {name, per_layer, [x, w, out, name] { Check(kernels::Matmul(x, w, out), name); },
          static_cast<double>(x.nbytes() + w.nbytes() + out.nbytes()),
          2.0 * static_cast<double>(x.dim(0)) * static_cast<double>(w.dim(0)) * static_cast<double>(x.dim(1))};
}

double Bytes(std::initializer_list<const Tensor*> tensors) {
  double b = 0;
  for (const Tensor* t : tensors) b += static_cast<double>(t->nbytes());
  return b;
}

// The tensors a decode step's ops read and write, random or empty, for
// `seqs` sequences of `q_len` new tokens each at context `context`.
struct ProfileInputs {
  ProfileInputs(const weights::ModelConfig& c, DType dt, int64_t seqs, int64_t q_len, int64_t context)
      : t(seqs * q_len), h(c.hidden_size), d(c.head_dim), qh(c.num_attention_heads), kv(c.num_key_value_heads),
        inter(c.intermediate_size), vocab(c.vocab_size), seqs(seqs) {
    const int64_t bs = 16, blocks_per_seq = (context + bs - 1) / bs, blocks = seqs * blocks_per_seq;
    x = RandomGpu({t, h}, dt, 1), res = RandomGpu({t, h}, dt, 2), wn = RandomGpu({h}, dt, 3);
    hn = Tensor::Empty({t, h}, dt, kGpu);
    wqkv = RandomGpu({(qh + 2 * kv) * d, h}, dt, 4, 0.02f), qkv = RandomGpu({t, (qh + 2 * kv) * d}, dt, 5);
    wo = RandomGpu({h, qh * d}, dt, 6, 0.02f), wgu = RandomGpu({2 * inter, h}, dt, 7, 0.02f);
    wd = RandomGpu({h, inter}, dt, 8, 0.02f), head = RandomGpu({vocab, h}, dt, 9, 0.02f);
    q = RandomGpu({t, qh, d}, dt, 10);
    dn = RandomGpu({d}, dt, 13), gu = RandomGpu({t, 2 * inter}, dt, 14);
    act = Tensor::Empty({t, inter}, dt, kGpu), attn = Tensor::Empty({t, qh, d}, dt, kGpu);
    logits = Tensor::Empty({seqs, vocab}, DType::kF32, kGpu), ids = Tensor::Empty({seqs}, DType::kI32, kGpu);
    kc = RandomGpu({blocks, bs, kv, d}, dt, 15), vc = RandomGpu({blocks, bs, kv, d}, dt, 16);
    std::vector<int32_t> pos(t), slots(t), qs{0}, lens, tables;
    for (int64_t s = 0; s < seqs; ++s) {
      for (int64_t i = 0; i < q_len; ++i) {
        const int64_t p = context - q_len + i;
        pos[s * q_len + i] = static_cast<int32_t>(p);
        slots[s * q_len + i] = static_cast<int32_t>((s * blocks_per_seq + p / bs) * bs + p % bs);
      }
      qs.push_back(static_cast<int32_t>((s + 1) * q_len));
      lens.push_back(static_cast<int32_t>(context));
      for (int64_t b = 0; b < blocks_per_seq; ++b) tables.push_back(static_cast<int32_t>(s * blocks_per_seq + b));
    }
    auto up = [](const std::vector<int32_t>& v, const Shape& shape) {
      return Value(Tensor::FromInts(v, shape).To(kGpu), "upload");
    };
    positions = up(pos, {t}), slot = up(slots, {t}), token_ids = up(std::vector<int32_t>(t, 7), {t});
    batch = kernels::AttentionBatch{up(qs, {seqs + 1}), up(lens, {seqs}), up(tables, {seqs, blocks_per_seq})};
    last = x.Rows(0, seqs);
  }
  int64_t t, h, d, qh, kv, inter, vocab, seqs;
  Tensor x, res, wn, hn, wqkv, qkv, wo, wgu, wd, head, q, dn, gu, act, attn, logits, ids, kc, vc;
  Tensor positions, slot, token_ids, last;
  kernels::AttentionBatch batch;
};

// The step's ops but its FFN, in step order (the FFN goes before the final norm).
std::vector<ProfiledOp> StepOps(const ProfileInputs& in) {
  const ProfileInputs& i = in;
  return {
      {"embedding", 0, [&i] { Check(kernels::Embedding(i.token_ids, i.head, 0, i.hn), "embedding"); }},
      {"fused_add_rmsnorm", 2, [&i] { Check(kernels::FusedAddRmsNorm(i.x, i.res, i.wn, 1e-6f, i.hn), "norm"); },
       Bytes({&i.x, &i.res, &i.res, &i.hn, &i.wn})},
      MatmulOp("matmul_qkv", 1, i.x, i.wqkv, i.qkv),
      {"qkv_norm_rope_cache", 1,
       [&i] {
         Check(kernels::QkvNormRopeCache(i.qkv, i.dn, i.dn, 1e-6f, i.positions, 1e6f, i.slot, i.kc, i.vc, i.q),
               "qkv input");
       }},
      {"attention", 1, [&i] { Check(kernels::PagedAttention(i.q, i.kc, i.vc, i.batch, 0.088f, i.attn), "attention"); },
       Bytes({&i.q, &i.kc, &i.vc, &i.attn})},
      MatmulOp("matmul_o", 1, i.attn.Reshape({i.t, i.qh * i.d}).value(), i.wo, i.hn),
      {"final_rmsnorm", 0, [&i] { Check(kernels::RmsNorm(i.x, i.wn, 1e-6f, i.hn), "final"); }},
      MatmulOp("lm_head_f32", 0, i.last, i.head, i.logits),
      {"argmax", 0, [&i] { Check(kernels::Argmax(i.logits, i.ids), "argmax"); }, Bytes({&i.logits, &i.ids})},
  };
}

std::vector<ProfiledOp> DenseFfnOps(const ProfileInputs& i) {
  return {
      MatmulOp("matmul_gate_up", 1, i.x, i.wgu, i.gu),
      {"silu_and_mul", 1, [&i] { Check(kernels::SiluAndMul(i.gu, i.act), "silu"); }, Bytes({&i.gu, &i.act})},
      MatmulOp("matmul_down", 1, i.act, i.wd, i.hn),
  };
}

// A MoE model (every layer sparse): its experts grouped on the device with
// the fused kernels, as decode runs them (--moe-experts auto; expert
// weights zero: only their bytes matter here).
struct MoeInputs {
  MoeInputs(const weights::ModelConfig& c, DType dt, const ProfileInputs& in)
      : k(c.num_experts_per_tok), t(in.t), h(in.h) {
    const int64_t experts = c.num_experts, mi = c.moe_intermediate_size, pairs = t * k;
    router = RandomGpu({experts, h}, dt, 17, 0.02f);
    router_logits = Tensor::Empty({t, experts}, DType::kF32, kGpu);
    route_w = Tensor::Empty({t, k}, DType::kF32, kGpu);
    route_e = Tensor::Empty({t, k}, DType::kI32, kGpu);
    wgu_e = Tensor::Zeros({experts, 2 * mi, h}, dt, kGpu);
    wd_e = Tensor::Zeros({experts, h, mi}, dt, kGpu);
    act_e = Tensor::Empty({pairs, mi}, dt, kGpu);
    y_e = Tensor::Empty({pairs, h}, dt, kGpu);
    groups = Value(kernels::ExpertGroups::Empty(experts, pairs, kGpu), "groups");
    Check(kernels::Matmul(in.x, router, router_logits), "router");
    Check(kernels::MoeRoute(router_logits, k, true, route_w, route_e), "route");
    Check(kernels::GroupByExpert(route_e, groups), "group");
  }
  int64_t k, t, h;
  Tensor router, route_w, route_e, router_logits, wgu_e, wd_e, act_e, y_e;
  kernels::ExpertGroups groups;
};

std::vector<ProfiledOp> MoeFfnOps(const ProfileInputs& i, const MoeInputs& m) {
  return {
      MatmulOp("moe_router_matmul", 1, i.x, m.router, m.router_logits),
      {"moe_route", 1, [&] { Check(kernels::MoeRoute(m.router_logits, m.k, true, m.route_w, m.route_e), "route"); }},
      {"moe_sort_routes", 1, [&] { Check(kernels::SortRoutesByExpert(m.route_w, m.route_e), "sort"); }},
      {"moe_group_by_expert", 1, [&] { Check(kernels::GroupByExpert(m.route_e, m.groups), "group"); }},
      {"moe_expert_gate_up_silu", 1,
       [&] { Check(kernels::ExpertGateUpSilu(i.x, m.wgu_e, m.groups, m.act_e), "gate_up"); }},
      {"moe_expert_down", 1, [&] { Check(kernels::ExpertDown(m.act_e, m.wd_e, m.groups, m.y_e), "down"); }},
      {"moe_finalize", 1,
       [&] { Check(kernels::MoeFinalize(m.y_e.Reshape({m.t, m.k, m.h}).value(), m.route_w, i.hn), "finalize"); }},
  };
}

int Profile(const Flags& flags) {
  const weights::ModelConfig c = Value(weights::LoadModelConfig(flags.Get("checkpoint", "")), "config.json");
  const DType dt = ParseDType(flags.Get("dtype", "bf16"));
  const int64_t seqs = flags.Int("seqs", 1), q_len = flags.Int("q-len", 1), context = flags.Int("context", 192);
  const ProfileInputs in(c, dt, seqs, q_len, context);
  std::optional<MoeInputs> moe;
  if (c.num_experts > 0) moe.emplace(c, dt, in);
  std::vector<ProfiledOp> ops = StepOps(in);
  const std::vector<ProfiledOp> ffn = moe ? MoeFfnOps(in, *moe) : DenseFfnOps(in);
  ops.insert(ops.begin() + 6, ffn.begin(), ffn.end());
  // Floors: bytes at the copy bandwidth, matmul FLOPs at the bf16 matmul peak, both measured here.
  const double copy_gbps = CopyGbps(size_t{1} << 30);
  const double peak = flags.Get("peak-tflops", "").empty() ? Bf16PeakTflops()
                                                           : static_cast<double>(flags.Int("peak-tflops", 0));
  json rows = json::array();
  double eager_step = 0, graph_step = 0, floor_step = 0;
  for (const ProfiledOp& op : ops) {
    const double eager = TimeUs(op.body, 50), graphed = GraphUs(op.body);
    const double calls = op.per_layer == 0 ? 1.0 : static_cast<double>(op.per_layer * c.num_hidden_layers);
    eager_step += eager * calls;
    graph_step += graphed * calls;
    json row = {{"op", op.name}, {"eager_us", eager}, {"graph_us", graphed}, {"calls_per_step", calls},
                {"graph_us_per_step", graphed * calls}};
    if (op.bytes > 0) {
      const double bytes_us = op.bytes / copy_gbps / 1e3, flops_us = op.flops / peak / 1e6;
      const double floor_us = std::max(bytes_us, flops_us);
      floor_step += floor_us * calls;
      row["bytes"] = op.bytes, row["flops"] = op.flops, row["bytes_us"] = bytes_us, row["flops_us"] = flops_us;
      row["floor_us"] = floor_us, row["floor_us_per_step"] = floor_us * calls, row["floor_ratio"] = graphed / floor_us;
      row["bound"] = flops_us > bytes_us ? "flops" : "bytes";
    }
    rows.push_back(row);
  }
  json choices = json::array();
  for (const kernels::MatmulChoice& ch : kernels::MatmulChoices()) {
    choices.push_back({{"m", ch.m}, {"n", ch.n}, {"k", ch.k}, {"kernel", ch.kernel}, {"algorithm", ch.algorithm},
                       {"timed", ch.timed}, {"kept", ch.kept}, {"first_us", ch.first_us}, {"kept_us", ch.kept_us}});
  }
  WriteJson(flags, {{"seqs", seqs}, {"q_len", q_len}, {"context", context}, {"ops", rows},
                    {"sum_eager_ms", eager_step / 1e3}, {"sum_graph_ms", graph_step / 1e3},
                    {"copy_gbps", copy_gbps}, {"peak_tflops", peak}, {"sum_floor_ms_of_floored_ops", floor_step / 1e3},
                    {"matmul_choices", choices},
                    {"note", "floor_us of an op: max(bytes / copy_gbps, flops / peak_tflops) (bytes: what it must "
                             "read and write once; flops: its matmul's 2 m n k); ops without bytes have no floor"}});
  return 0;
}

int Logits(const Flags& flags) {
  const int64_t new_tokens = flags.Int("new-tokens", 8);
  const std::string prefix = flags.Get("out", "");
  if (prefix.empty()) {
    std::cerr << "logits: --out PREFIX is required\n";
    return 2;
  }
  std::ifstream in(flags.Get("prompts", ""));
  if (!in) {
    std::cerr << "logits: cannot read --prompts " << flags.Get("prompts", "") << "\n";
    return 2;
  }
  const json prompts = json::parse(in);
  Model m = LoadModel(flags, flags.Int("cache-mib", 2048) << 20);
  const int64_t vocab = m.model->config().vocab_size;
  std::ofstream bin(prefix + ".bin", std::ios::binary);
  json meta = {{"vocab", vocab}, {"prompts", json::array()}};
  auto write = [&bin](const Tensor& logits) {
    Tensor host = Value(logits.To(Device::CPU()), "download");
    bin.write(static_cast<const char*>(host.raw_data()), static_cast<std::streamsize>(host.nbytes()));
    return host;
  };
  auto argmax_of_last = [vocab](const Tensor& host) {
    const float* row = host.data<float>() + (host.rows() - 1) * vocab;
    return static_cast<int32_t>(std::max_element(row, row + vocab) - row);  // first maximum
  };
  for (size_t p = 0; p < prompts.size(); ++p) {
    const std::vector<int32_t> tokens = prompts[p].get<std::vector<int32_t>>();
    const int64_t len = static_cast<int64_t>(tokens.size());
    Tensor prefill = write(Value(Forward(m, StepInput{{SequenceStep{p, tokens, 0}}, true}), "prefill"));
    std::vector<int32_t> chosen{argmax_of_last(prefill)};
    if (new_tokens > 0) write(prefill.Rows(len - 1, 1).Clone());
    for (int64_t k = 1; k < new_tokens; ++k) {
      Tensor step = write(Value(Forward(m, StepInput{{SequenceStep{p, {chosen.back()}, len + k - 1}}, false}), "decode"));
      chosen.push_back(argmax_of_last(step));
    }
    chosen.resize(new_tokens);
    meta["prompts"].push_back({{"prefill_rows", len}, {"tokens", chosen}});
    Check(m.cache->Free(p), "free");
  }
  std::ofstream(prefix + ".json") << meta.dump() << "\n";
  return 0;
}


}  // namespace
}  // namespace seam::bench

int main(int argc, char** argv) {
  const std::string cmd = argc > 1 ? argv[1] : "";
  if (!seam::CudaAvailable()) {
    std::cerr << "seam-bench-gpu: no CUDA device visible\n";
    return 1;
  }
  seam::bench::Flags flags(argc, argv);
  // Every mode: how Matmul chooses its kernels (seam/kernels/matmul_tuning.h).
  seam::kernels::MatmulTuning tuning;
  tuning.candidates = static_cast<int>(flags.Int("matmul-candidates", tuning.candidates));
  tuning.max_tuned_rows = flags.Int("matmul-max-tuned-rows", tuning.max_tuned_rows);
  seam::bench::Check(seam::kernels::SetMatmulTuning(tuning), "--matmul-candidates / --matmul-max-tuned-rows");
  // Every mode: programmatic dependent launch (seam/kernels/programmatic_launch.h); decode alone runs both.
  const std::string pdl = flags.Get("pdl", "off");
  if (pdl != "on" && pdl != "off" && !(pdl == "both" && cmd == "decode")) {
    std::cerr << "--pdl: takes on or off (decode also both), got " << pdl << "\n";
    return 2;
  }
  seam::kernels::SetProgrammaticLaunch(pdl != "off");
  if (cmd == "norm") return seam::bench::Norm(flags);
  if (cmd == "decode") return seam::bench::Decode(flags);
  if (cmd == "prefill") return seam::bench::Prefill(flags);
  if (cmd == "logits") return seam::bench::Logits(flags);
  if (cmd == "profile") return seam::bench::Profile(flags);
  if (cmd == "allreduce-norm") return seam::bench::AllReduceNormBench(flags);
  if (cmd == "mamba") return seam::bench::MambaBench(flags);
  if (cmd == "moe-kernels") return seam::bench::MoeKernelsBench(flags);
  if (cmd == "tbo") return seam::bench::TboBench(flags);
  if (cmd == "cp") return seam::bench::CpBench(flags);
  if (cmd == "attention") return seam::bench::AttentionBench(flags);
  if (cmd == "latent-attention") return seam::bench::LatentAttentionBench(flags);
  if (cmd == "matmul") return seam::bench::MatmulBench(flags);
  if (cmd == "argmax") return seam::bench::ArgmaxBench(flags);
  std::cerr << "usage: seam-bench-gpu <norm|decode|prefill|profile|logits|allreduce-norm|mamba|moe-kernels|tbo|cp|"
               "attention|latent-attention|matmul|argmax> [--flag value]...\n";
  return 2;
}
