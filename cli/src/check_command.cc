// `seam check`: the same prompts through a TP group (optionally split into
// pipeline pieces) and through one rank, teacher-forced with the single rank's
// greedy tokens so that every step's logits are comparable.
#include "check_command.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "absl/strings/str_cat.h"
#include "command_status.h"
#include "local_pipeline.h"
#include "seam/boundary/ipc_fusion.h"
#include "seam/boundary/reduction_policy.h"
#include "seam/boundary/variant_choice.h"
#include "seam/core/status.h"
#include "seam/runtime/stage_group.h"

namespace seam::cli {
namespace {

// Largest errors of the logits tensors added (rel: max |a - b| / max |b| per
// tensor), and how many token rows on their own exceed `tolerance` that way
// (one row far off, e.g. where a MoE expert choice flipped, reads differently
// from every row a little off).
struct Error {
  explicit Error(double tolerance) : tolerance(tolerance) {}
  double tolerance;
  double abs = 0, rel = 0;
  bool bitwise = true;
  int64_t rows = 0, rows_above = 0;
  void Add(const Tensor& got, const Tensor& want) {
    const std::vector<float> a = got.ToFloats(), b = want.ToFloats();
    if (a.size() != b.size() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) != 0) bitwise = false;
    if (a.size() != b.size()) {
      abs = rel = INFINITY;
      return;
    }
    // One pass over the rows; the tensor's maxima are the rows' maxima.
    double max_abs = 0, max_ref = 0;
    const int64_t vocab = want.dim(-1);
    for (int64_t r = 0; r < want.rows(); ++r) {
      double row_abs = 0, row_ref = 0;
      for (int64_t v = r * vocab; v < (r + 1) * vocab; ++v) {
        row_abs = std::max(row_abs, std::fabs(static_cast<double>(a[v]) - b[v]));
        row_ref = std::max(row_ref, std::fabs(static_cast<double>(b[v])));
      }
      ++rows;
      if ((row_ref > 0 ? row_abs / row_ref : row_abs) > tolerance) ++rows_above;
      max_abs = std::max(max_abs, row_abs);
      max_ref = std::max(max_ref, row_ref);
    }
    abs = std::max(abs, max_abs);
    rel = std::max(rel, max_ref > 0 ? max_abs / max_ref : max_abs);
  }
  std::string RowsText() const { return absl::StrCat(" (", rows_above, " of ", rows, " rows above the tolerance)"); }
};

int32_t ArgmaxLast(const Tensor& logits) {
  const std::vector<float> v = logits.ToFloats();
  const int64_t vocab = logits.dim(-1), row = logits.rows() - 1;
  int32_t best = 0;
  for (int64_t i = 1; i < vocab; ++i) {
    if (v[row * vocab + i] > v[row * vocab + best]) best = static_cast<int32_t>(i);
  }
  return best;
}

runtime::StageGroupOptions GroupOptions(const CheckCommandOptions& o) {
  runtime::StageGroupOptions so;
  so.device = o.device == "cuda" ? Device::Kind::kCUDA : Device::Kind::kCPU;
  so.model.dtype = o.dtype == "bf16" ? DType::kBF16 : DType::kF32;
  so.cache.dtype = so.model.dtype;
  so.allreduce_fusion.mode = boundary::ParseAllReduceFusionMode(o.allreduce_fusion).value_or(
      boundary::AllReduceFusionMode::kOff);
  so.variants = boundary::ParseVariantChoice(o.variant).value_or(boundary::VariantChoiceOptions{});
  return so;
}

// The distributed side: pp pieces with even layer ranges; one step runs them
// in order, handing each TP rank's PipelineTensors to the next piece.
class Pieces {
 public:
  absl::Status Create(const CheckCommandOptions& o, boundary::ReductionPolicy policy, int layers) {
    for (int k = 0; k < o.pp; ++k) {
      runtime::StageGroupOptions so = GroupOptions(o);
      so.first_gpu = o.device == "cuda" ? FirstGpuOfStage(k, o.tp, o.pp) : 0;
      so.model.first_layer = k * layers / o.pp;
      so.model.end_layer = (k + 1) * layers / o.pp;
      so.attn_cp = o.cp;
      // With CP ranks, auto checks what they are for: every prefill context-parallel.
      if (o.cp > 1 && o.variant == "auto") so.variants.mode = boundary::VariantMode::kContextParallel;
      auto g = runtime::StageGroup::Create(o.model_dir, o.tp, o.attn_dp, policy, so);
      if (!g.ok()) return g.status();
      ranges_ += absl::StrCat(k ? " " : "", "[", so.model.first_layer, ",", so.model.end_layer, ")");
      groups_.push_back(std::move(*g));
    }
    return absl::OkStatus();
  }
  // The first piece's all-reduce fusion report ("" without one).
  std::string FusionReport() const { return groups_.empty() ? "" : groups_[0]->FusionReport(); }
  absl::StatusOr<std::vector<Tensor>> Step(std::vector<models::SequenceStep> batch, bool all_logits) {
    // The check places sequence i on attention-DP group i mod attn_dp, as a coordinator would spread them.
    for (size_t i = 0; i < batch.size(); ++i) batch[i].dp_group = static_cast<int>(i % groups_[0]->attn_dp());
    if (groups_.size() == 1) return groups_[0]->Step(batch, all_logits);
    std::vector<boundary::PipelineTensors> in;
    for (size_t k = 0; k < groups_.size(); ++k) {
      auto piece = groups_[k]->StepPiece(batch, all_logits, in);
      if (!piece.ok()) {
        return absl::Status(piece.status().code(), absl::StrCat("piece ", k, ": ", piece.status().message()));
      }
      if (k + 1 == groups_.size()) return std::move(piece->logits);
      in = std::move(piece->handoff);
    }
    return absl::InternalError("no pieces");
  }
  const std::string& ranges() const { return ranges_; }

 private:
  std::vector<std::unique_ptr<runtime::StageGroup>> groups_;
  std::string ranges_;
};

// The flags' own faults, before anything is loaded. INVALID_ARGUMENT.
absl::Status CheckFlags(const CheckCommandOptions& o) {
  if (o.tp < 1 || o.attn_dp < 1 || o.tp % o.attn_dp != 0) {
    return absl::InvalidArgumentError(absl::StrCat("--attn-dp ", o.attn_dp, " does not divide --tp ", o.tp));
  }
  if (o.pp < 1) return absl::InvalidArgumentError(absl::StrCat("--pp ", o.pp, " must be >= 1"));
  if (o.cp < 1 || (o.tp / o.attn_dp) % o.cp != 0 || (o.cp > 1 && o.attn_dp > 1)) {
    return absl::InvalidArgumentError(absl::StrCat("--cp ", o.cp, " must divide --tp ", o.tp,
                                                   " and runs without attention DP (--attn-dp ", o.attn_dp, ")"));
  }
  if (o.prompts < 1 || o.max_len < 2 || o.decode_steps < 0) {
    return absl::InvalidArgumentError("--prompts must be >= 1, --max-len >= 2 and --decode-steps >= 0");
  }
  if ((o.device != "cpu" && o.device != "cuda") || (o.dtype != "f32" && o.dtype != "bf16")) {
    return absl::InvalidArgumentError("--device must be cpu or cuda and --dtype f32 or bf16");
  }
  if (auto v = boundary::ParseVariantChoice(o.variant); !v.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--variant: ", v.status().message()));
  }
  if (auto mode = boundary::ParseAllReduceFusionMode(o.allreduce_fusion); !mode.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--allreduce-fusion: ", mode.status().message()));
  }
  return absl::OkStatus();
}

// The prompts: `prompts` random ones of 2..max_len tokens from the seed.
std::vector<models::SequenceStep> Prompts(const CheckCommandOptions& o, int64_t vocab) {
  std::mt19937_64 rng(o.seed);
  std::vector<models::SequenceStep> batch;
  for (int p = 0; p < o.prompts; ++p) {
    models::SequenceStep s;
    s.sequence = p + 1;
    const int len = 2 + static_cast<int>((p * 7 + 3) % (o.max_len - 1));
    for (int t = 0; t < len; ++t) s.tokens.push_back(static_cast<int32_t>(rng() % vocab));
    batch.push_back(s);
  }
  return batch;
}

// The errors of every step and the greedy choices that differ.
struct Comparison {
  explicit Comparison(double tolerance) : prefill(tolerance), decode(tolerance) {}
  Error prefill, decode;
  int token_mismatches = 0, near_ties = 0;
};

// Whether `got`'s greedy token differs from `want`'s beyond a bf16 near-tie,
// counted into `c`; returns the reference's token.
int32_t CompareChoice(const Tensor& got, const Tensor& want, const CheckCommandOptions& o, Comparison& c) {
  const int32_t reference = ArgmaxLast(want);
  const int32_t chose = ArgmaxLast(got);
  if (chose == reference) return reference;
  // In bf16 a choice between two logits closer than the rounding of
  // either side (2 · tolerance · max |logit|) is a tie, not a mismatch.
  const std::vector<float> w = want.ToFloats();
  const int64_t vocab = want.dim(-1), row = (want.rows() - 1) * vocab;
  double scale = 0;
  for (int64_t v = 0; v < vocab; ++v) scale = std::max(scale, std::fabs(static_cast<double>(w[row + v])));
  const double gap = static_cast<double>(w[row + reference]) - w[row + chose];
  if (o.dtype == "bf16" && gap <= 2 * o.tolerance * scale) {
    ++c.near_ties;
  } else {
    ++c.token_mismatches;
  }
  return reference;
}

// Prefill, then decode steps teacher-forced with the single rank's greedy tokens.
absl::StatusOr<Comparison> Compare(const CheckCommandOptions& o, runtime::StageGroup& ref, Pieces& dist,
                                   std::vector<models::SequenceStep> batch) {
  Comparison c(o.tolerance);
  std::vector<int32_t> next(batch.size());
  for (int step = 0; step <= o.decode_steps; ++step) {
    auto want = ref.Step(batch, step == 0);
    auto got = dist.Step(batch, step == 0);
    if (!want.ok() || !got.ok()) {
      return Failed(absl::StrCat("step ", step, " failed: "), want.ok() ? got.status() : want.status());
    }
    for (size_t i = 0; i < batch.size(); ++i) {
      (step == 0 ? c.prefill : c.decode).Add((*got)[i], (*want)[i]);
      next[i] = CompareChoice((*got)[i], (*want)[i], o, c);
    }
    for (size_t i = 0; i < batch.size(); ++i) {
      batch[i].start += static_cast<int64_t>(batch[i].tokens.size());
      batch[i].tokens = {next[i]};
    }
  }
  return c;
}

absl::Status Report(const CheckCommandOptions& o, const Comparison& c, const std::string& fusion_report,
                    std::ostream& out) {
  const bool bitwise = c.prefill.bitwise && c.decode.bitwise;
  // One rank per piece runs the single rank's arithmetic in the same order.
  const bool ok = c.prefill.rel <= o.tolerance && c.decode.rel <= o.tolerance && c.token_mismatches == 0 &&
                  (bitwise || o.tp > 1);
  out << "prefill logits: max abs err " << c.prefill.abs << ", rel err " << c.prefill.rel << c.prefill.RowsText()
      << "\n";
  out << "decode logits:  max abs err " << c.decode.abs << ", rel err " << c.decode.rel << c.decode.RowsText()
      << "\n";
  out << "greedy tokens:  "
      << (c.token_mismatches == 0 ? "identical" : std::to_string(c.token_mismatches) + " differ");
  if (c.near_ties > 0) out << " (" << c.near_ties << " more differ within a bf16 near-tie of the reference)";
  out << "\n";
  out << "bitwise identical: " << (bitwise ? "yes" : "no") << (o.tp == 1 ? " (required at tp 1)" : "") << "\n";
  out << "tolerance: rel err <= " << o.tolerance
      << (o.dtype == "bf16" ? " (bf16: each side rounds its own fp32 values at every op; greedy choices between "
                              "logits within 2x that of each other count as ties)\n"
                            : " (fp32 arithmetic; a TP split only reorders fp32 sums)\n");
  if (!fusion_report.empty()) out << fusion_report << "\n";
  out << (ok ? "OK" : "MISMATCH") << "\n";
  if (ok) return absl::OkStatus();
  return absl::InternalError(absl::StrCat("MISMATCH: tp ", o.tp, " pp ", o.pp,
                                          " differs from one rank beyond the report's tolerance"));
}

}  // namespace

absl::Status RunCheckCommand(const CheckCommandOptions& o, std::ostream& out) {
  auto policy = boundary::ParseReductionPolicy(o.policy);
  if (!policy.ok()) return absl::InvalidArgumentError(policy.status().message());
  SEAM_RETURN_IF_ERROR(CheckFlags(o));
  // Creating the groups reads --model: INVALID_ARGUMENT there (a config that
  // does not divide over --tp) is the flags' fault and keeps its code.
  auto ref = runtime::StageGroup::Create(o.model_dir, 1, 1, *policy, GroupOptions(o));
  if (!ref.ok()) return Described("single rank: ", ref.status());
  const int layers = static_cast<int>((*ref)->config().num_hidden_layers);
  if (o.pp > layers) {
    return absl::InvalidArgumentError(absl::StrCat("--pp ", o.pp, " exceeds the model's ", layers, " layers"));
  }
  Pieces dist;
  if (absl::Status s = dist.Create(o, *policy, layers); !s.ok()) {
    return Described(absl::StrCat("tp ", o.tp, " pp ", o.pp, " group: "), s);
  }
  const int64_t vocab = (*ref)->config().vocab_size;
  out << "seam check: " << o.model_dir << " (" << (*ref)->config().architecture << ", " << vocab
      << " vocab) tp " << o.tp << " attn_dp " << o.attn_dp << " pp " << o.pp << " (layers " << dist.ranges()
      << ") policy " << o.policy << " variant "
      << (o.cp > 1 && o.variant == "auto" ? "context-parallel" : o.variant) << (o.cp > 1 ? " cp " : "")
      << (o.cp > 1 ? std::to_string(o.cp) : "") << " vs 1 rank; "
      << o.prompts << " prompts, " << o.decode_steps << " decode steps\n";
  SEAM_ASSIGN_OR_RETURN(const Comparison c, Compare(o, **ref, dist, Prompts(o, vocab)));
  return Report(o, c, dist.FusionReport(), out);
}

}  // namespace seam::cli
