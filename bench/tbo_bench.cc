// seam-bench-gpu tbo: two-batch overlap of a Qwen3-MoE prefill at TP 2, one
// thread per GPU. The same step (--seqs sequences of --len tokens, default
// 2 × 4096) runs as the ordinary forward (one stream, one NCCL communicator
// per group) and as Qwen3Model::ForwardTwoBatch (the sequences split in two
// balanced microbatches, each on its own CUDA stream with its own NCCL
// communicators, interleaved by --order). A timing wrapper records CUDA
// events around every collective of the ordinary forward, which gives the
// time its stream spends in collectives; the overlap's saving is measured
// against it: hidden = (ordinary − TBO) / collective time (goal ≥ 0.7).
// Prints one table and one JSON object (also to --json). Needs two GPUs.
#include <cuda_runtime_api.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpu_bench_util.h"
#include "multi_rank_setup.h"
#include "seam/comm/nccl_communicator.h"
#include "seam/comm/process_groups.h"
#include "seam/comm/store.h"
#include "seam/core/cuda_graph.h"
#include "seam/core/device_memory.h"
#include "seam/models/qwen3_model.h"
#include "seam/weights/checkpoint.h"

namespace seam::bench {
namespace {

// Forwards every call to `inner` and records a CUDA event pair around each on
// the communicator's stream; Elapsed() sums them once the stream has passed.
class TimedCommunicator final : public comm::Communicator {
 public:
  TimedCommunicator(comm::Communicator* inner, cudaStream_t stream) : inner_(inner), stream_(stream) {}
  ~TimedCommunicator() override { Reset(); }
  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  const std::string& name() const override { return inner_->name(); }
  absl::Status AllReduce(const Tensor& d) override {
    return Timed([&] { return inner_->AllReduce(d); });
  }
  absl::Status ReduceScatter(const Tensor& in, const Tensor& out) override {
    return Timed([&] { return inner_->ReduceScatter(in, out); });
  }
  absl::Status ReduceScatterV(const Tensor& in, const std::vector<int64_t>& c, const Tensor& out) override {
    return Timed([&] { return inner_->ReduceScatterV(in, c, out); });
  }
  absl::Status AllGather(const Tensor& in, const Tensor& out) override {
    return Timed([&] { return inner_->AllGather(in, out); });
  }
  absl::Status AllGatherV(const Tensor& in, const std::vector<int64_t>& c, const Tensor& out) override {
    return Timed([&] { return inner_->AllGatherV(in, c, out); });
  }
  absl::Status Broadcast(const Tensor& d, int root) override {
    return Timed([&] { return inner_->Broadcast(d, root); });
  }
  absl::Status Barrier() override { return inner_->Barrier(); }
  absl::Status Synchronize(absl::Time deadline) override { return inner_->Synchronize(deadline); }

  // Milliseconds inside the collectives recorded since the last Reset (the stream must have passed them).
  double ElapsedMs() const {
    double ms = 0;
    for (const auto& [a, b] : events_) {
      float e = 0;
      if (cudaEventElapsedTime(&e, a, b) == cudaSuccess) ms += e;
    }
    return ms;
  }
  int calls() const { return static_cast<int>(events_.size()); }
  void Reset() {
    for (auto& [a, b] : events_) {
      cudaEventDestroy(a);
      cudaEventDestroy(b);
    }
    events_.clear();
  }

 private:
  template <typename F>
  absl::Status Timed(F call) {
    cudaEvent_t a = nullptr, b = nullptr;
    cudaEventCreate(&a);
    cudaEventCreate(&b);
    cudaEventRecord(a, stream_);
    const absl::Status s = call();
    cudaEventRecord(b, stream_);
    events_.push_back({a, b});
    return s;
  }
  comm::Communicator* inner_;
  cudaStream_t stream_;
  std::vector<std::pair<cudaEvent_t, cudaEvent_t>> events_;
};

// NCCL groups of one rank whose collectives run on `stream`.
absl::StatusOr<std::unique_ptr<comm::ProcessGroups>> GroupsOn(std::shared_ptr<comm::Store> store,
                                                              const std::string& name, int tp, int rank,
                                                              void* stream) {
  SEAM_ASSIGN_OR_RETURN(auto groups,
                        comm::ProcessGroups::Create(comm::Topology{tp, 1, 1}, rank,
                                                    comm::MakeNcclGroupFactory(comm::MakePrefixStore(name, store),
                                                                               comm::CommOptions{absl::Seconds(120)})));
  for (comm::Communicator* c : {&groups->tp(), &groups->attn_tp(), &groups->attn_dp()}) {
    if (auto* nccl = dynamic_cast<comm::NcclCommunicator*>(c)) nccl->SetStream(stream);
  }
  return groups;
}

struct RankResult {
  std::vector<double> plain_ms, tbo_ms, collective_ms;
  int collectives = 0;
  double max_rel_err = 0, top1_agree = 0;
  std::string error;
};

// What every rank runs: the flags, the checkpoint and the step.
struct TboRun {
  int tp = 2;
  int64_t seqs = 2, len = 4096;
  int iters = 5, warmup = 2;
  boundary::TboOrder order = boundary::TboOrder::kAlternate;
  std::string path;
  DType dtype = DType::kBF16;
  int64_t kv_bytes = int64_t{4} << 30;
  const weights::Checkpoint* checkpoint = nullptr;
  std::shared_ptr<comm::Store> store;
  std::vector<models::SequenceStep> sequences;
};

// The flags of the run (its checkpoint and store still to open); nullopt, with
// the message written, when they do not fit.
std::optional<TboRun> ParseTboFlags(const Flags& flags, int* exit_code) {
  TboRun run;
  run.tp = static_cast<int>(flags.Int("tp", 2));
  run.seqs = flags.Int("seqs", 2);
  run.len = flags.Int("len", 4096);
  run.iters = static_cast<int>(flags.Int("iters", 5));
  run.warmup = static_cast<int>(flags.Int("warmup", 2));
  run.path = flags.Get("checkpoint", "");
  run.dtype = ParseDType(flags.Get("dtype", "bf16"));
  run.kv_bytes = flags.Int("kv-bytes", int64_t{4} << 30);
  const int gpus = CudaDeviceCount();
  if (gpus < run.tp || run.tp < 2) {
    std::cerr << "seam-bench-gpu tbo: needs " << std::max(run.tp, 2) << " GPUs (TP " << run.tp
              << ", one GPU per rank); " << gpus << " visible\n";
    *exit_code = 1;
    return std::nullopt;
  }
  if (run.path.empty()) {
    std::cerr << "seam-bench-gpu tbo: --checkpoint DIR (a Qwen3-MoE checkpoint) is required\n";
    *exit_code = 2;
    return std::nullopt;
  }
  const std::string order_name = flags.Get("order", "alternate");
  bool known = false;
  for (auto o : {boundary::TboOrder::kAlternate, boundary::TboOrder::kAlternateBFirst, boundary::TboOrder::kStaggered,
                 boundary::TboOrder::kSequential}) {
    if (order_name == boundary::TboOrderName(o)) run.order = o, known = true;
  }
  if (!known) {
    std::cerr << "--order: alternate, alternate-b-first, staggered or sequential\n";
    *exit_code = 2;
    return std::nullopt;
  }
  return run;
}

// One rank's model, cache, streams and groups: the main stream (and its
// communicators, the TP one timed) and one stream and group set per microbatch.
struct TboRank {
  CudaStream main, mb0, mb1;
  std::unique_ptr<comm::ProcessGroups> g_main, g_a, g_b;
  std::unique_ptr<TimedCommunicator> timed;
  boundary::Topology topology;
  std::unique_ptr<models::Qwen3Model> model;
  std::unique_ptr<models::KvCache> cache;

  // What the rank holds goes on the main stream, communicators before streams.
  ~TboRank() {
    kernels::ScopedStream on(main.handle());
    cache.reset();
    model.reset();
    timed.reset();
    g_b.reset();
    g_a.reset();
    g_main.reset();
  }

  absl::Status Start(const TboRun& run, int r) {
    const Device dev = Device::CUDA(r);
    SEAM_RETURN_IF_ERROR(UseDevice(dev));
    SEAM_ASSIGN_OR_RETURN(main, CudaStream::Create(dev));
    SEAM_ASSIGN_OR_RETURN(mb0, CudaStream::Create(dev));
    SEAM_ASSIGN_OR_RETURN(mb1, CudaStream::Create(dev));
    kernels::ScopedStream on(main.handle());
    SEAM_ASSIGN_OR_RETURN(g_main, GroupsOn(run.store, "main", run.tp, r, main.handle()));
    SEAM_ASSIGN_OR_RETURN(g_a, GroupsOn(run.store, "mb0", run.tp, r, mb0.handle()));
    SEAM_ASSIGN_OR_RETURN(g_b, GroupsOn(run.store, "mb1", run.tp, r, mb1.handle()));
    timed = std::make_unique<TimedCommunicator>(&g_main->tp(), static_cast<cudaStream_t>(main.handle()));
    SEAM_ASSIGN_OR_RETURN(topology, boundary::Topology::Make(run.tp, 1, r));
    models::ModelOptions options{topology, boundary::ReductionPolicy::kAr, run.dtype};
    options.device = dev;
    SEAM_ASSIGN_OR_RETURN(model, models::Qwen3Model::Load(*run.checkpoint, options));
    models::KvCacheOptions kv;
    kv.budget_bytes = run.kv_bytes;
    kv.dtype = run.dtype;
    SEAM_ASSIGN_OR_RETURN(cache, model->MakeCache(kv));
    return absl::OkStatus();
  }

  absl::Status Sync() {
    const absl::Time deadline = absl::Now() + absl::Seconds(120);
    for (auto* g : {g_main.get(), g_a.get(), g_b.get()}) SEAM_RETURN_IF_ERROR(g->Synchronize(deadline));
    return main.Synchronize();
  }

  absl::Status FreeAll(const TboRun& run) {
    for (const auto& s : run.sequences) SEAM_RETURN_IF_ERROR(cache->Free(s.sequence));
    return absl::OkStatus();
  }

  // Iteration i: the ordinary forward (its collectives timed), then the two-batch overlap.
  absl::Status Once(const TboRun& run, int i, RankResult& out, Tensor& plain_logits, Tensor& tbo_logits) {
    const std::vector<int64_t> rows = {run.seqs * run.len};
    const models::StepInput input{run.sequences, false};
    models::TwoBatchStep tbo = models::BalancedTwoBatchStep(input);
    tbo.order = run.order;
    tbo.comms[0] = boundary::StageComms{&g_a->tp(), &g_a->attn_tp(), &g_a->attn_dp()};
    tbo.comms[1] = boundary::StageComms{&g_b->tp(), &g_b->attn_tp(), &g_b->attn_dp()};
    tbo.streams[0] = mb0.handle();
    tbo.streams[1] = mb1.handle();
    kernels::ScopedStream on(main.handle());
    SEAM_RETURN_IF_ERROR(Sync());
    timed->Reset();
    boundary::ForwardBatch plain(2 * i, boundary::BatchVariant::kOrdinary, topology, rows);
    plain.comms = boundary::StageComms{timed.get(), timed.get(), &g_main->attn_dp()};
    auto t0 = std::chrono::steady_clock::now();
    SEAM_ASSIGN_OR_RETURN(plain_logits, model->Forward(plain, input, *cache));
    SEAM_RETURN_IF_ERROR(Sync());
    const double plain_ms = Seconds(t0) * 1e3;
    SEAM_RETURN_IF_ERROR(FreeAll(run));
    boundary::ForwardBatch split(2 * i + 1, boundary::BatchVariant::kOrdinary, topology, rows);
    split.comms = boundary::StageComms{&g_main->tp(), &g_main->attn_tp(), &g_main->attn_dp()};
    t0 = std::chrono::steady_clock::now();
    SEAM_ASSIGN_OR_RETURN(tbo_logits, model->ForwardTwoBatch(split, input, *cache, tbo));
    SEAM_RETURN_IF_ERROR(Sync());
    const double tbo_ms = Seconds(t0) * 1e3;
    SEAM_RETURN_IF_ERROR(FreeAll(run));
    if (i >= run.warmup) {
      out.plain_ms.push_back(plain_ms);
      out.tbo_ms.push_back(tbo_ms);
      out.collective_ms.push_back(timed->ElapsedMs());
      out.collectives = timed->calls();
    }
    return absl::OkStatus();
  }
};

// Rank r's part: every iteration, then (rank 0) how far the two logits are apart.
absl::Status RunTboRank(const TboRun& run, int r, RankResult& out) {
  TboRank rank;
  SEAM_RETURN_IF_ERROR(rank.Start(run, r));
  Tensor plain_logits, tbo_logits;
  for (int i = 0; i < run.warmup + run.iters; ++i) {
    SEAM_RETURN_IF_ERROR(rank.Once(run, i, out, plain_logits, tbo_logits));
  }
  rank.timed->Reset();
  if (r != 0) return absl::OkStatus();
  kernels::ScopedStream on(rank.main.handle());
  SEAM_ASSIGN_OR_RETURN(Tensor a, plain_logits.To(Device::CPU()));
  SEAM_ASSIGN_OR_RETURN(Tensor b, tbo_logits.To(Device::CPU()));
  out.max_rel_err = MaxRelativeDifference(a.ToFloats(), b.ToFloats());
  const std::vector<int32_t> ta = ArgmaxToHost(plain_logits), tb = ArgmaxToHost(tbo_logits);
  int same = 0;
  for (size_t k = 0; k < ta.size(); ++k) same += ta[k] == tb[k];
  out.top1_agree = ta.empty() ? 1.0 : static_cast<double>(same) / ta.size();
  return absl::OkStatus();
}

void ReportTbo(const Flags& flags, const TboRun& run, const weights::ModelConfig& config, const RankResult& r0) {
  const double plain = Median(r0.plain_ms), tbo = Median(r0.tbo_ms), coll = Median(r0.collective_ms);
  const double hidden = coll > 0 ? (plain - tbo) / coll : 0;
  json j = {{"mode", "tbo"},
            {"checkpoint", run.path},
            {"layers", config.num_hidden_layers},
            {"tp", run.tp},
            {"dtype", flags.Get("dtype", "bf16")},
            {"sequences", run.seqs},
            {"tokens_per_sequence", run.len},
            {"order", boundary::TboOrderName(run.order)},
            {"iters", run.iters},
            {"no_tbo_ms", plain},
            {"tbo_ms", tbo},
            {"collective_ms_no_tbo", coll},
            {"collectives_no_tbo", r0.collectives},
            {"speedup", tbo > 0 ? plain / tbo : 0},
            {"hidden_fraction", hidden},
            {"goal_hidden_fraction", 0.7},
            {"goal_met", hidden >= 0.7},
            {"logits_max_rel_err", r0.max_rel_err},
            {"top1_agreement", r0.top1_agree},
            {"no_tbo_ms_all", r0.plain_ms},
            {"tbo_ms_all", r0.tbo_ms},
            {"collective_ms_all", r0.collective_ms}};
  std::printf("two-batch overlap, Qwen3-MoE prefill %lld x %lld tokens, TP %d, %s, order %s (rank 0, median of %d)\n",
              static_cast<long long>(run.seqs), static_cast<long long>(run.len), run.tp,
              flags.Get("dtype", "bf16").c_str(), boundary::TboOrderName(run.order), run.iters);
  std::printf("%-34s %10s\n", "", "ms");
  std::printf("%-34s %10.2f\n", "forward without TBO", plain);
  std::printf("%-34s %10.2f\n", "  of which in collectives", coll);
  std::printf("%-34s %10.2f\n", "forward with TBO", tbo);
  std::printf("%-34s %10.2f  (%.0f%% of the collective time; goal 70%%)\n", "saved", plain - tbo, 100 * hidden);
  std::printf("logits: max relative difference %.2e, top-1 agreement %.4f\n", r0.max_rel_err, r0.top1_agree);
  WriteJson(flags, j);
}

}  // namespace

int TboBench(const Flags& flags) {
  int exit_code = 0;
  std::optional<TboRun> run = ParseTboFlags(flags, &exit_code);
  if (!run) return exit_code;
  std::optional<MultiRankSetup> setup_files = OpenMultiRank(flags, run->path, "tbo");
  if (!setup_files) return 1;
  run->checkpoint = setup_files->checkpoint.get();
  run->store = setup_files->store;
  const weights::ModelConfig& config = run->checkpoint->config();
  for (int64_t s = 0; s < run->seqs; ++s) {
    run->sequences.push_back(
        models::SequenceStep{static_cast<uint64_t>(s), RandomTokens(11 + s, run->len, config.vocab_size), 0});
  }
  std::vector<RankResult> results(run->tp);
  std::vector<std::thread> threads;
  for (int r = 0; r < run->tp; ++r) {
    threads.emplace_back([&, r] {
      const absl::Status st = RunTboRank(*run, r, results[r]);
      if (!st.ok()) results[r].error = st.ToString();
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < run->tp; ++r) {
    if (!results[r].error.empty()) {
      std::cerr << "seam-bench-gpu tbo: rank " << r << ": " << results[r].error << "\n";
      return 1;
    }
  }
  ReportTbo(flags, *run, config, results[0]);
  return 0;
}

}  // namespace seam::bench
