// logits_command.h: prompts through one rank, every logit row to a file.
#include "logits_command.h"

#include <algorithm>
#include <chrono>
#include <fstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "command_status.h"
#include "seam/core/status.h"
#include "seam/runtime/stage_group.h"

namespace seam::cli {
namespace {

using json = nlohmann::json;
using Prompts = std::vector<std::vector<int32_t>>;

// A JSON array of arrays of token ids. INVALID_ARGUMENT names the flag.
absl::StatusOr<Prompts> ReadTokenLists(const std::string& path, const char* flag) {
  std::ifstream in(path);
  if (!in) return absl::InvalidArgumentError(absl::StrCat(flag, ": cannot read ", path));
  const json j = json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!j.is_array()) return absl::InvalidArgumentError(absl::StrCat(flag, ": ", path, " is not a JSON array"));
  Prompts out;
  for (const json& p : j) {
    if (!p.is_array()) return absl::InvalidArgumentError(absl::StrCat(flag, ": entry ", out.size(), " is not an array"));
    std::vector<int32_t> ids;
    for (const json& t : p) {
      if (!t.is_number_integer()) {
        return absl::InvalidArgumentError(absl::StrCat(flag, ": entry ", out.size(), " holds a non-integer"));
      }
      ids.push_back(t.get<int32_t>());
    }
    out.push_back(std::move(ids));
  }
  return out;
}

absl::Status CheckInputs(const LogitsCommandOptions& o, const Prompts& prompts, const Prompts& forced,
                         int64_t vocab) {
  for (size_t p = 0; p < prompts.size(); ++p) {
    if (prompts[p].empty()) return absl::InvalidArgumentError(absl::StrCat("--prompts: prompt ", p, " is empty"));
    for (int32_t t : prompts[p]) {
      if (t < 0 || t >= vocab) {
        return absl::InvalidArgumentError(absl::StrCat("--prompts: prompt ", p, " holds token ", t,
                                                       ", outside the vocabulary of ", vocab));
      }
    }
  }
  if (o.forced.empty()) return absl::OkStatus();
  if (forced.size() != prompts.size()) {
    return absl::InvalidArgumentError(absl::StrCat("--forced holds ", forced.size(), " entries for ",
                                                   prompts.size(), " prompts"));
  }
  for (size_t p = 0; p < forced.size(); ++p) {
    if (static_cast<int>(forced[p].size()) < o.new_tokens - 1) {
      return absl::InvalidArgumentError(absl::StrCat("--forced: entry ", p, " holds ", forced[p].size(),
                                                     " tokens, --new-tokens ", o.new_tokens, " needs ",
                                                     o.new_tokens - 1));
    }
    for (int32_t t : forced[p]) {
      if (t < 0 || t >= vocab) return absl::InvalidArgumentError(absl::StrCat("--forced: token ", t, " out of range"));
    }
  }
  return absl::OkStatus();
}

// The first maximum of row `row` of host logits.
int32_t ArgmaxRow(const std::vector<float>& v, int64_t row, int64_t vocab) {
  const float* r = v.data() + row * vocab;
  return static_cast<int32_t>(std::max_element(r, r + vocab) - r);
}

}  // namespace

absl::Status RunLogitsCommand(const LogitsCommandOptions& o, std::ostream& out) {
  if ((o.device != "cpu" && o.device != "cuda") || (o.dtype != "f32" && o.dtype != "bf16")) {
    return absl::InvalidArgumentError("--device must be cpu or cuda and --dtype f32 or bf16");
  }
  if (o.new_tokens < 1) return absl::InvalidArgumentError(absl::StrCat("--new-tokens must be >= 1, got ", o.new_tokens));
  if (o.out.empty()) return absl::InvalidArgumentError("--out PREFIX is required");
  SEAM_ASSIGN_OR_RETURN(const Prompts prompts, ReadTokenLists(o.prompts, "--prompts"));
  Prompts forced;
  if (!o.forced.empty()) {
    SEAM_ASSIGN_OR_RETURN(forced, ReadTokenLists(o.forced, "--forced"));
  }

  runtime::StageGroupOptions so;
  so.device = o.device == "cuda" ? Device::Kind::kCUDA : Device::Kind::kCPU;
  so.model.dtype = o.dtype == "bf16" ? DType::kBF16 : DType::kF32;
  so.cache.dtype = so.model.dtype;
  so.rank_deadline = absl::Hours(2);  // a long prompt's prefill on the host's reference kernels takes minutes
  int64_t longest = 0;
  for (const auto& p : prompts) longest = std::max<int64_t>(longest, static_cast<int64_t>(p.size()));
  so.kv.max_step_tokens = std::max<int64_t>(so.kv.max_step_tokens, longest);
  auto group = runtime::StageGroup::Create(o.model_dir, 1, 1, boundary::ReductionPolicy::kAr, so);
  if (!group.ok()) return Described("loading --model: ", group.status());
  const int64_t vocab = (*group)->config().vocab_size;
  SEAM_RETURN_IF_ERROR(CheckInputs(o, prompts, forced, vocab));

  std::ofstream bin(o.out + ".bin", std::ios::binary | std::ios::trunc);
  if (!bin) return absl::InvalidArgumentError(absl::StrCat("--out: cannot write ", o.out, ".bin"));
  auto write = [&bin](const std::vector<float>& v, int64_t first, int64_t count) {
    bin.write(reinterpret_cast<const char*>(v.data() + first), static_cast<std::streamsize>(count * sizeof(float)));
  };
  json meta = {{"vocab", vocab}, {"device", o.device}, {"dtype", o.dtype}, {"forced", !o.forced.empty()},
               {"prompts", json::array()}};
  for (size_t p = 0; p < prompts.size(); ++p) {
    const auto t0 = std::chrono::steady_clock::now();
    const int64_t len = static_cast<int64_t>(prompts[p].size());
    models::SequenceStep step{p + 1, prompts[p], 0, 0};
    auto prefill = (*group)->Step({step}, /*all_logits=*/true);
    if (!prefill.ok()) return Failed(absl::StrCat("prompt ", p, " prefill: "), prefill.status());
    const std::vector<float> rows = (*prefill)[0].ToFloats();
    if (static_cast<int64_t>(rows.size()) != len * vocab) {
      return absl::InternalError(absl::StrCat("prompt ", p, ": the prefill returned ", rows.size(), " logits, not ",
                                              len, " x ", vocab));
    }
    write(rows, 0, len * vocab);
    write(rows, (len - 1) * vocab, vocab);
    std::vector<int32_t> chosen{ArgmaxRow(rows, len - 1, vocab)};
    for (int k = 1; k < o.new_tokens; ++k) {
      step.start += static_cast<int64_t>(step.tokens.size());
      step.tokens = {o.forced.empty() ? chosen.back() : forced[p][k - 1]};
      auto logits = (*group)->Step({step}, false);
      if (!logits.ok()) return Failed(absl::StrCat("prompt ", p, " decode step ", k, ": "), logits.status());
      const std::vector<float> row = (*logits)[0].ToFloats();
      write(row, 0, vocab);
      chosen.push_back(ArgmaxRow(row, 0, vocab));
    }
    SEAM_RETURN_IF_ERROR((*group)->Free(p + 1));
    meta["prompts"].push_back({{"prefill_rows", len}, {"tokens", chosen}});
    out << "prompt " << p << ": " << len << " tokens, " << o.new_tokens << " rows after the prefill, "
        << std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() << " s\n";
  }
  bin.close();
  if (!bin) return absl::InternalError(absl::StrCat("writing ", o.out, ".bin failed"));
  std::ofstream(o.out + ".json") << meta.dump() << "\n";
  out << "wrote " << o.out << ".bin and " << o.out << ".json (" << prompts.size() << " prompts, vocab " << vocab
      << ", " << o.device << " " << o.dtype << ")\n";
  return absl::OkStatus();
}

}  // namespace seam::cli
