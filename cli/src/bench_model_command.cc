// `seam bench model`: times prefill and decode of the same batch at TP 1 and
// TP 2 back to back, so the ratio compares two measurements of one moment.
#include "bench_model_command.h"

#include <algorithm>
#include <chrono>
#include <fstream>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "command_status.h"
#include "seam/core/temp_dir.h"
#include "seam/runtime/stage_group.h"
#include "seam/weights/random_checkpoint.h"

namespace seam::cli {
namespace {

struct Throughput {
  double prefill_tps = 0, decode_tps = 0;
};

absl::StatusOr<Throughput> Measure(const std::string& dir, int tp, const BenchModelOptions& o, int64_t vocab) {
  runtime::StageGroupOptions options;
  options.kv.cache_bytes = int64_t{1} << 30;
  // The whole batch's prefill is one step.
  options.kv.max_step_tokens = std::max<int64_t>(options.kv.max_step_tokens, int64_t{o.batch} * o.prompt_len);
  auto group = runtime::StageGroup::Create(dir, tp, 1, boundary::ReductionPolicy::kAuto, options);
  if (!group.ok()) return group.status();
  Throughput best;
  uint64_t next_id = 1;
  for (int r = 0; r < o.repeats; ++r) {
    std::vector<models::SequenceStep> batch;
    for (int s = 0; s < o.batch; ++s) {
      models::SequenceStep step{next_id++, {}, 0};
      for (int t = 0; t < o.prompt_len; ++t) step.tokens.push_back(static_cast<int32_t>((s * 131 + t * 7) % vocab));
      batch.push_back(step);
    }
    auto t0 = std::chrono::steady_clock::now();
    auto prefill = (*group)->Step(batch, false);
    if (!prefill.ok()) return prefill.status();
    auto t1 = std::chrono::steady_clock::now();
    for (int k = 0; k < o.decode_steps; ++k) {
      for (auto& s : batch) {
        s.start += static_cast<int64_t>(s.tokens.size());
        s.tokens = {static_cast<int32_t>((s.start * 13) % vocab)};
      }
      auto step = (*group)->Step(batch, false);
      if (!step.ok()) return step.status();
    }
    auto t2 = std::chrono::steady_clock::now();
    for (const auto& s : batch) (void)(*group)->Free(s.sequence);
    const double prefill_s = std::chrono::duration<double>(t1 - t0).count();
    const double decode_s = std::chrono::duration<double>(t2 - t1).count();
    best.prefill_tps = std::max(best.prefill_tps, o.batch * o.prompt_len / prefill_s);
    if (o.decode_steps > 0) best.decode_tps = std::max(best.decode_tps, o.batch * o.decode_steps / decode_s);
  }
  return best;
}

}  // namespace

absl::Status RunBenchModelCommand(const BenchModelOptions& o, std::ostream& out) {
  if (o.batch < 1 || o.prompt_len < 1 || o.decode_steps < 0 || o.repeats < 1) {
    return absl::InvalidArgumentError("--batch, --prompt-len and --repeats must be >= 1, --decode-steps >= 0");
  }
  std::string dir = o.model_dir;
  if (dir.empty()) {
    absl::StatusOr<std::string> made = MakeTempDir("seam-bench-");
    if (!made.ok()) return Failed("", made.status());
    dir = *made;
    weights::ModelConfig c;
    c.architecture = "qwen3";
    c.hidden_size = o.hidden;
    c.num_hidden_layers = o.layers;
    c.num_attention_heads = 8;
    c.num_key_value_heads = 4;
    c.head_dim = o.hidden / 8;
    c.intermediate_size = o.hidden * 3;
    c.vocab_size = o.vocab;
    absl::Status s = weights::WriteRandomCheckpoint(c, weights::RandomCheckpointOptions{1}, dir);
    if (!s.ok()) return Failed("", s);
  }
  auto config = weights::LoadModelConfig(dir);
  if (!config.ok()) return absl::InvalidArgumentError(config.status().ToString());  // --model or the sizes
  const unsigned cores = std::thread::hardware_concurrency();
  out << "seam bench model: " << config->architecture << " hidden " << config->hidden_size << ", "
      << config->num_hidden_layers << " layers, vocab " << config->vocab_size << "; batch " << o.batch
      << " x prompt " << o.prompt_len << ", " << o.decode_steps << " decode steps; best of " << o.repeats << "; "
      << cores << " cores\n";
  nlohmann::json results = {{"cores", cores}, {"batch", o.batch}, {"prompt_len", o.prompt_len},
                            {"decode_steps", o.decode_steps}, {"hidden", config->hidden_size},
                            {"layers", config->num_hidden_layers}};
  Throughput base;
  for (int tp : {1, 2}) {
    auto t = Measure(dir, tp, o, config->vocab_size);
    if (!t.ok()) return Failed(absl::StrCat("tp ", tp, ": "), t.status());
    if (tp == 1) base = *t;
    out << "tp " << tp << ": prefill " << static_cast<int64_t>(t->prefill_tps) << " tokens/s (x"
        << t->prefill_tps / base.prefill_tps << " of tp 1), decode " << static_cast<int64_t>(t->decode_tps)
        << " tokens/s (x" << (base.decode_tps > 0 ? t->decode_tps / base.decode_tps : 0) << " of tp 1)\n";
    results["tp" + std::to_string(tp)] = {{"prefill_tokens_per_s", t->prefill_tps},
                                          {"decode_tokens_per_s", t->decode_tps}};
  }
  if (!o.json_out.empty()) std::ofstream(o.json_out) << results.dump(2) << "\n";
  return absl::OkStatus();
}

}  // namespace seam::cli
