// seam-bench-gpu cp: context-parallel prefill of one long prompt. One prompt
// of --len tokens (default 32768) through a Qwen3 checkpoint, prefilled at
// CP 1 (GPU 0, TP 1, the ordinary forward) and at CP N (--cp, default 2: N
// GPUs, one thread per GPU, NCCL groups of tp = attn_cp = N, attention TP 1,
// no attention DP, every prefill CONTEXT_PARALLEL, as `seam check --cp N`
// and a served stage with --cp N build it). Each side's time is the median
// over --iters prefills (after --warmup), each the slowest rank's wall time
// from a common start (an NCCL barrier) to its stream and collectives having
// finished; speedup = CP 1 / CP N (goal ≥ 1.6 at CP 2, 32768 tokens). The
// prefill returns the last row's logits only (no [len, vocab] tensor);
// CP N's are compared with CP 1's (max relative difference, argmax). With
// fewer GPUs than N only CP 1 runs, and the report says why. Prints one
// table and one JSON object (also to --json).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "gpu_bench_util.h"
#include "multi_rank_setup.h"
#include "seam/boundary/reduction_policy.h"
#include "seam/boundary/variant_choice.h"
#include "seam/comm/nccl_communicator.h"
#include "seam/comm/process_groups.h"
#include "seam/comm/store.h"
#include "seam/core/cuda_graph.h"
#include "seam/core/device_memory.h"
#include "seam/models/decoder_model.h"
#include "seam/weights/checkpoint.h"

namespace seam::bench {
namespace {

// What both sides share.
struct CpSetup {
  const weights::Checkpoint* checkpoint = nullptr;
  std::shared_ptr<comm::Store> store;
  boundary::ReductionPolicy policy = boundary::ReductionPolicy::kAr;  // resolved
  DType dtype = DType::kBF16;
  int64_t kv_bytes = 0;
  int iters = 3, warmup = 1;
  std::vector<int32_t> tokens;  // the prompt
};

// One side's outcome.
struct CpRun {
  int cp = 1;
  bool ran = false;
  std::string variant;         // the batch variant the prefill ran as
  std::vector<double> ms;      // per timed prefill: the slowest rank's milliseconds
  std::vector<float> logits;   // rank 0's last-row logits, fp32 on the host
  std::string error;           // empty when it succeeded
};

int32_t ArgmaxOf(const std::vector<float>& v) {  // the first maximum
  return v.empty() ? -1 : static_cast<int32_t>(std::max_element(v.begin(), v.end()) - v.begin());
}

// KV bytes one rank needs for the prompt: a CP rank writes the K and V of
// every row (the whole sequence) at attention TP 1, as one rank does; plus
// one block, an eighth and 16 MiB of headroom.
int64_t DefaultKvBytes(const weights::ModelConfig& c, int64_t len, DType dtype) {
  const int64_t block = models::KvCacheOptions{}.block_size;
  const int64_t blocks = (len + block - 1) / block + 1;
  const int64_t bytes =
      blocks * block * 2 * c.num_hidden_layers * c.num_key_value_heads * c.head_dim * DTypeSize(dtype);
  return bytes + bytes / 8 + (int64_t{16} << 20);
}

// Rank r of a CP group of `cp` GPUs: loads its shards, runs warmup + iters
// prefills of the prompt and records each one's milliseconds in ms[i].
absl::Status RunRank(const CpSetup& s, int cp, int r, std::vector<double>* ms, std::vector<float>* logits,
                     std::string* variant_name) {
  const Device dev = Device::CUDA(r);
  SEAM_RETURN_IF_ERROR(UseDevice(dev));
  SEAM_ASSIGN_OR_RETURN(CudaStream stream, CudaStream::Create(dev));
  kernels::ScopedStream on(stream.handle());  // kernels, memory and collectives of this rank
  SEAM_ASSIGN_OR_RETURN(const boundary::Topology topology, boundary::Topology::Make(cp, 1, r, cp));
  // Groups of one rank are SelfCommunicators: at CP 1 no NCCL communicator is made.
  const comm::CommunicatorFactory factory = comm::MakeNcclGroupFactory(
      comm::MakePrefixStore("cp" + std::to_string(cp), s.store), comm::CommOptions{absl::Seconds(120)});
  SEAM_ASSIGN_OR_RETURN(auto groups, comm::ProcessGroups::Create(comm::Topology{cp, 1, 1, cp}, r, factory));
  for (comm::Communicator* c : {&groups->tp(), &groups->attn_tp(), &groups->attn_dp(), &groups->attn_cp()}) {
    if (auto* nccl = dynamic_cast<comm::NcclCommunicator*>(c)) nccl->SetStream(stream.handle());
  }
  // No input fusion provider: the served default (--allreduce-fusion auto)
  // fuses only sums of a few tokens, never a prefill of this size.
  models::ModelOptions options{topology, s.policy, s.dtype};
  options.device = dev;
  SEAM_ASSIGN_OR_RETURN(auto model, models::LoadDecoderModel(*s.checkpoint, options));
  models::KvCacheOptions kv;
  kv.budget_bytes = s.kv_bytes;
  kv.dtype = s.dtype;
  SEAM_ASSIGN_OR_RETURN(auto cache, model->MakeCache(kv));
  // The served choice: with CP ranks every prefill CONTEXT_PARALLEL (`seam
  // check --cp`'s auto); at one rank ORDINARY.
  boundary::VariantChoiceOptions choice;
  if (cp > 1) choice.mode = boundary::VariantMode::kContextParallel;
  SEAM_RETURN_IF_ERROR(boundary::ValidateVariantChoice(choice, topology));
  const int64_t len = static_cast<int64_t>(s.tokens.size());
  const std::vector<int64_t> dp_rows = {len};
  const boundary::BatchVariant variant = boundary::ChooseBatchVariant(choice, topology, dp_rows, /*prefill=*/true);
  if (cp > 1 && variant != boundary::BatchVariant::kContextParallel) {
    return absl::InternalError(absl::StrCat("the prefill would run ", boundary::BatchVariantName(variant),
                                            ", not CONTEXT_PARALLEL"));
  }
  *variant_name = boundary::BatchVariantName(variant);
  const uint64_t sequence = 1;
  const models::StepInput input{{models::SequenceStep{sequence, s.tokens, 0}}, /*all_logits=*/false};
  auto wait = [&]() -> absl::Status {
    SEAM_RETURN_IF_ERROR(groups->Synchronize(absl::Now() + absl::Seconds(120)));
    return stream.Synchronize();
  };
  Tensor last;
  for (int i = 0; i < s.warmup + s.iters; ++i) {
    // A common start: every rank leaves the barrier within microseconds.
    SEAM_RETURN_IF_ERROR(groups->tp().Barrier());
    SEAM_RETURN_IF_ERROR(wait());
    const auto t0 = std::chrono::steady_clock::now();
    boundary::ForwardBatch batch(static_cast<uint64_t>(i), variant, topology, dp_rows);
    batch.comms = boundary::StageComms{&groups->tp(), &groups->attn_tp(), &groups->attn_dp(), &groups->attn_cp()};
    SEAM_ASSIGN_OR_RETURN(last, model->Forward(batch, input, *cache));
    SEAM_RETURN_IF_ERROR(wait());
    const double elapsed = Seconds(t0) * 1e3;
    SEAM_RETURN_IF_ERROR(cache->Free(sequence));
    if (i >= s.warmup) (*ms)[i - s.warmup] = elapsed;
  }
  // Rank 0 (CP rank 0, attention-TP rank 0) computes the lm_head: [1, vocab].
  if (r == 0) {
    if (!last.defined() || last.rows() != 1) return absl::InternalError("rank 0 returned no last-row logits");
    SEAM_ASSIGN_OR_RETURN(Tensor host, last.To(Device::CPU()));
    *logits = host.ToFloats();
  }
  return absl::OkStatus();
}

// Runs one side: `cp` rank threads on GPUs 0..cp-1.
CpRun RunSide(const CpSetup& s, int cp) {
  CpRun run;
  run.cp = cp;
  run.ran = true;
  std::vector<std::vector<double>> ms(cp, std::vector<double>(s.iters, 0));
  std::vector<std::string> errors(cp), variants(cp);
  std::vector<std::thread> threads;
  for (int r = 0; r < cp; ++r) {
    threads.emplace_back([&, r] {
      const absl::Status st = RunRank(s, cp, r, &ms[r], &run.logits, &variants[r]);
      if (!st.ok()) errors[r] = st.ToString();
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < cp; ++r) {
    if (!errors[r].empty()) {
      run.error = absl::StrCat(run.error, run.error.empty() ? "" : "; ", "rank ", r, ": ", errors[r]);
    }
  }
  run.variant = variants[0];
  for (int i = 0; i < s.iters && run.error.empty(); ++i) {
    double slowest = 0;
    for (int r = 0; r < cp; ++r) slowest = std::max(slowest, ms[r][i]);
    run.ms.push_back(slowest);
  }
  return run;
}

json SideJson(const CpRun& run, int64_t len) {
  if (!run.ran || !run.error.empty()) return nullptr;
  const double ms = Median(run.ms);
  return {{"cp", run.cp},       {"gpus", run.cp}, {"variant", run.variant}, {"ms", ms},
          {"ms_all", run.ms}, {"tokens_per_s", ms > 0 ? len / (ms * 1e-3) : 0}};
}

void PrintRow(const CpRun& run, int64_t len) {
  const std::string name = "CP " + std::to_string(run.cp);
  if (!run.ran) return;
  if (!run.error.empty()) {
    std::printf("%-6s %5d  failed: %s\n", name.c_str(), run.cp, run.error.c_str());
    return;
  }
  const double ms = Median(run.ms);
  std::printf("%-6s %5d  %-18s %12.2f %12.0f\n", name.c_str(), run.cp, run.variant.c_str(), ms,
              ms > 0 ? len / (ms * 1e-3) : 0.0);
}

// Both sides of the comparison and how they compare.
struct CpOutcome {
  CpRun one, many;
  std::string skipped;  // why CP > 1 did not run ("" when it did)
  bool both = false;    // both ran without error
  double speedup = 0, rel = 0;
  int32_t top_one = -1, top_many = -1;
};

CpOutcome Compare(CpRun one, CpRun many, std::string skipped) {
  CpOutcome o{std::move(one), std::move(many), std::move(skipped)};
  o.both = o.one.error.empty() && o.many.ran && o.many.error.empty();
  const double one_ms = Median(o.one.ms), many_ms = Median(o.many.ms);
  o.speedup = o.both && many_ms > 0 ? one_ms / many_ms : 0;
  if (o.both && o.one.logits.size() == o.many.logits.size()) {
    o.rel = MaxRelativeDifference(o.one.logits, o.many.logits);
  } else if (o.both) {
    o.rel = INFINITY;
  }
  o.top_one = ArgmaxOf(o.one.logits);
  o.top_many = ArgmaxOf(o.many.logits);
  return o;
}

json CpJson(const Flags& flags, const CpSetup& setup, const weights::ModelConfig& config, const CpOutcome& o, int cp,
            int64_t len, int gpus) {
  const bool both = o.both;
  return json{{"mode", "cp"},
              {"checkpoint", flags.Get("checkpoint", "")},
              {"architecture", config.architecture},
              {"layers", config.num_hidden_layers},
              {"hidden", config.hidden_size},
              {"dtype", flags.Get("dtype", "bf16")},
              {"policy", boundary::ReductionPolicyName(setup.policy)},
              {"tokens", len},
              {"cp", cp},
              {"gpus_visible", gpus},
              {"iters", setup.iters},
              {"warmup", setup.warmup},
              {"kv_bytes_per_rank", setup.kv_bytes},
              {"cp1", SideJson(o.one, len)},
              {"cpn", SideJson(o.many, len)},
              {"cp1_error", o.one.error.empty() ? json(nullptr) : json(o.one.error)},
              {"cpn_error", o.many.error.empty() ? json(nullptr) : json(o.many.error)},
              {"cpn_ran", o.many.ran},
              {"cpn_skipped", o.skipped.empty() ? json(nullptr) : json(o.skipped)},
              {"speedup", both ? json(o.speedup) : json(nullptr)},
              {"goal_speedup", 1.6},
              {"goal_met", both ? json(o.speedup >= 1.6) : json(nullptr)},
              {"logits_max_rel_diff", both ? json(o.rel) : json(nullptr)},
              {"argmax_cp1", o.one.error.empty() ? json(o.top_one) : json(nullptr)},
              {"argmax_cpn", both ? json(o.top_many) : json(nullptr)},
              {"argmax_match", both ? json(o.top_one == o.top_many) : json(nullptr)}};
}

void PrintCp(const Flags& flags, const CpSetup& setup, const weights::ModelConfig& config, const CpOutcome& o, int cp,
             int64_t len) {
  std::printf("context-parallel prefill: %s, %lld layers, hidden %lld; one prompt of %lld tokens, %s, policy %s\n"
              "(median of %d after %d warm-up; each prefill's time is its slowest rank's)\n",
              config.architecture.c_str(), static_cast<long long>(config.num_hidden_layers),
              static_cast<long long>(config.hidden_size), static_cast<long long>(len),
              flags.Get("dtype", "bf16").c_str(), boundary::ReductionPolicyName(setup.policy), setup.iters,
              setup.warmup);
  std::printf("%-6s %5s  %-18s %12s %12s\n", "", "GPUs", "variant", "ms", "tokens/s");
  PrintRow(o.one, len);
  PrintRow(o.many, len);
  const std::string cp_name = "CP " + std::to_string(cp);
  if (!o.skipped.empty()) std::printf("%-6s %5d  not run: %s\n", cp_name.c_str(), cp, o.skipped.c_str());
  if (o.both) {
    std::printf("speedup CP 1 / CP %d: %.2fx (goal >= 1.6 at CP 2, 32768 tokens)\n", cp, o.speedup);
    std::printf("last-row logits: max relative difference %.2e; argmax CP 1 %d, CP %d %d (%s)\n", o.rel, o.top_one, cp,
                o.top_many, o.top_one == o.top_many ? "match" : "differ");
  }
}

}  // namespace

int CpBench(const Flags& flags) {
  const std::string path = flags.Get("checkpoint", "");
  const int64_t len = flags.Int("len", 32768);
  const int cp = static_cast<int>(flags.Int("cp", 2));
  const int iters = static_cast<int>(flags.Int("iters", 3)), warmup = static_cast<int>(flags.Int("warmup", 1));
  if (path.empty()) {
    std::cerr << "seam-bench-gpu cp: --checkpoint DIR (a Qwen3 checkpoint) is required\n";
    return 2;
  }
  if (cp < 2 || len < 2 * cp || iters < 1 || warmup < 0) {
    std::cerr << "seam-bench-gpu cp: --cp must be >= 2, --len >= 2 x cp, --iters >= 1, --warmup >= 0\n";
    return 2;
  }
  auto policy = boundary::ParseReductionPolicy(flags.Get("policy", "auto"));
  if (!policy.ok()) {
    std::cerr << "--policy: " << policy.status() << "\n";
    return 2;
  }
  std::optional<MultiRankSetup> setup_files = OpenMultiRank(flags, path, "cp");
  if (!setup_files) return 1;
  const weights::ModelConfig& config = setup_files->checkpoint->config();
  CpSetup setup;
  setup.checkpoint = setup_files->checkpoint.get();
  setup.store = setup_files->store;
  setup.policy = boundary::ResolveReductionPolicy(*policy, config.architecture);
  setup.dtype = ParseDType(flags.Get("dtype", "bf16"));
  setup.kv_bytes = flags.Int("kv-bytes", DefaultKvBytes(config, len, setup.dtype));
  setup.iters = iters;
  setup.warmup = warmup;
  setup.tokens = RandomTokens(17, len, config.vocab_size);
  const int gpus = CudaDeviceCount();
  CpRun one = RunSide(setup, 1);
  CpRun many;
  many.cp = cp;
  std::string skipped;
  if (gpus < cp) {
    skipped = absl::StrCat("needs ", cp, " GPUs (one per CP rank), ", gpus, " visible");
  } else if (!one.error.empty()) {
    skipped = "CP 1 failed, so CP " + std::to_string(cp) + " was not tried";
  } else {
    many = RunSide(setup, cp);
  }
  const CpOutcome o = Compare(std::move(one), std::move(many), skipped);
  PrintCp(flags, setup, config, o, cp, len);
  WriteJson(flags, CpJson(flags, setup, config, o, cp, len, gpus));
  if (!o.one.error.empty()) std::cerr << "seam-bench-gpu cp: CP 1 failed: " << o.one.error << "\n";
  if (!o.many.error.empty()) std::cerr << "seam-bench-gpu cp: CP " << cp << " failed: " << o.many.error << "\n";
  // Only CP 1 run (too few GPUs) is a success; a failure of either side is not.
  return o.one.error.empty() && o.many.error.empty() ? 0 : 1;
}

}  // namespace seam::bench
