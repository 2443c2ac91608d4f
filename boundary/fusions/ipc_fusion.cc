// The IPC one-shot all-reduce + add + RMSNorm as an input fusion: the
// candidate, its provider, the group-wide measurement that decides for it
// and the per-rank construction.
#include "seam/boundary/ipc_fusion.h"

#include <chrono>
#include <functional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "seam/core/device_memory.h"
#include "seam/core/status.h"
#include "seam/kernels/ops.h"
#include "seam/kernels/stream.h"

namespace seam::boundary {

const char* AllReduceFusionModeName(AllReduceFusionMode mode) {
  switch (mode) {
    case AllReduceFusionMode::kOff: return "off";
    case AllReduceFusionMode::kAuto: return "auto";
    case AllReduceFusionMode::kAlways: return "always";
  }
  return "?";
}

absl::StatusOr<AllReduceFusionMode> ParseAllReduceFusionMode(const std::string& text) {
  for (AllReduceFusionMode m : {AllReduceFusionMode::kOff, AllReduceFusionMode::kAuto, AllReduceFusionMode::kAlways}) {
    if (text == AllReduceFusionModeName(m)) return m;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown all-reduce fusion mode '", text, "' (expected off, auto or always)"));
}

IpcInputFusion::IpcInputFusion(SumGroup completes, std::shared_ptr<comm::IpcAllReduceFusion> kernel,
                               comm::AllReduceNormTable table, bool always)
    : completes_(completes), kernel_(std::move(kernel)), table_(std::move(table)), always_(always) {}

bool IpcInputFusion::Chooses(int64_t tokens) const {
  if (tokens < 1 || tokens > kernel_->max_tokens()) return false;
  return always_ || comm::ChooseFusedAllReduce(tokens, kernel_->hidden(), table_);
}

absl::StatusOr<bool> IpcInputFusion::TryCompleteAddNorm(const Tensor& contribution, const Tensor& residual,
                                                        const NormParams& norm, const Tensor& out,
                                                        comm::Communicator& group) {
  // Only facts every rank of the group shares (see the header).
  if (group.size() != kernel_->size() || !contribution.device().is_cuda() ||
      contribution.dtype() != DType::kBF16 || norm.weight.dtype() != DType::kBF16 || contribution.rank() != 2 ||
      contribution.dim(1) != kernel_->hidden() || !residual.is_contiguous() || !Chooses(contribution.dim(0))) {
    return false;
  }
  if (kernel_->Failed()) return kernel_->CheckError();
  const Tensor partial = contribution.is_contiguous() ? contribution : contribution.Clone();
  SEAM_RETURN_IF_ERROR(kernel_->Run(partial, residual, norm.weight, norm.eps, out, kernels::CurrentStream()));
  runs_.fetch_add(1, std::memory_order_relaxed);
  return true;
}

IpcFusionProvider::IpcFusionProvider(std::vector<std::shared_ptr<IpcInputFusion>> candidates)
    : candidates_(std::move(candidates)) {}

int64_t IpcFusionProvider::runs() const {
  int64_t n = 0;
  for (const auto& c : candidates_) n += c->runs();
  return n;
}

std::vector<std::shared_ptr<InputFusion>> IpcFusionProvider::InputFusions(const StagePlan&) const {
  return {candidates_.begin(), candidates_.end()};
}

namespace {

// Mean µs per call of `iters` back-to-back calls of fn after `warmup` ones.
absl::StatusOr<double> TimeCalls(Device device, int warmup, int iters, const std::function<absl::Status()>& fn) {
  for (int i = 0; i < warmup; ++i) SEAM_RETURN_IF_ERROR(fn());
  SEAM_RETURN_IF_ERROR(SynchronizeStream(device));
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i) SEAM_RETURN_IF_ERROR(fn());
  SEAM_RETURN_IF_ERROR(SynchronizeStream(device));
  const std::chrono::duration<double, std::micro> spent = std::chrono::steady_clock::now() - start;
  return spent.count() / iters;
}

}  // namespace

absl::StatusOr<comm::AllReduceNormTable> MeasureAllReduceNorm(comm::IpcAllReduceFusion& kernel,
                                                              comm::Communicator& group, Device device,
                                                              const std::vector<int64_t>& token_counts, int iters) {
  const int64_t hidden = kernel.hidden();
  SEAM_ASSIGN_OR_RETURN(Tensor weight, Tensor::Zeros({hidden}, DType::kBF16).To(device));
  const int n = static_cast<int>(token_counts.size());
  std::vector<float> timings;  // [fused, unfused] per token count
  for (int64_t tokens : token_counts) {
    // Zero rows keep the residual unchanged however often the calls repeat.
    const Shape shape{tokens, hidden};
    SEAM_ASSIGN_OR_RETURN(Tensor partial, Tensor::Zeros(shape, DType::kBF16).To(device));
    SEAM_ASSIGN_OR_RETURN(Tensor residual, Tensor::Zeros(shape, DType::kBF16).To(device));
    SEAM_ASSIGN_OR_RETURN(Tensor out, Tensor::TryEmpty(shape, DType::kBF16, device));
    SEAM_ASSIGN_OR_RETURN(double fused, TimeCalls(device, 5, iters, [&] {
                            return kernel.Run(partial, residual, weight, 1e-6f, out, kernels::CurrentStream());
                          }));
    SEAM_RETURN_IF_ERROR(kernel.CheckError());
    SEAM_ASSIGN_OR_RETURN(double unfused, TimeCalls(device, 5, iters, [&]() -> absl::Status {
                            SEAM_RETURN_IF_ERROR(group.AllReduce(partial));
                            return kernels::FusedAddRmsNorm(partial, residual, weight, 1e-6f, out);
                          }));
    timings.push_back(static_cast<float>(fused));
    timings.push_back(static_cast<float>(unfused));
  }
  // The group's mean, identical on every rank.
  SEAM_ASSIGN_OR_RETURN(Tensor shared, Tensor::FromFloats(timings, {2 * n}).To(device));
  SEAM_RETURN_IF_ERROR(group.AllReduce(shared));
  SEAM_RETURN_IF_ERROR(group.Synchronize(absl::Now() + absl::Seconds(30)));
  SEAM_ASSIGN_OR_RETURN(Tensor host, shared.To(Device::CPU()));
  const std::vector<float> sums = host.ToFloats();
  comm::AllReduceNormTable table;
  for (int i = 0; i < n; ++i) {
    table[{token_counts[i], hidden}] = comm::AllReduceNormTiming{sums[2 * i] / group.size(),
                                                                 sums[2 * i + 1] / group.size()};
  }
  return table;
}

std::string DescribeTable(const comm::AllReduceNormTable& table, int64_t hidden) {
  std::string s;
  for (const auto& [key, t] : table) {
    if (key.second != hidden) continue;
    absl::StrAppendFormat(&s, "%s%d: %.1f/%.1f us (%s)", s.empty() ? "" : ", ", key.first, t.fused_us, t.unfused_us,
                          comm::ChooseFusedAllReduce(key.first, hidden, table) ? "fused" : "unfused");
  }
  return s;
}

namespace {

std::vector<int64_t> PowersOfTwoUpTo(int64_t max_tokens) {
  std::vector<int64_t> counts;
  for (int64_t t = 1; t < max_tokens; t *= 2) counts.push_back(t);
  counts.push_back(max_tokens);
  return counts;
}

// Appends `line` to the report `log` (when there is one), one line each.
void AppendLine(std::string* log, const std::string& line) {
  if (log != nullptr) absl::StrAppend(log, log->empty() ? "" : "\n", line);
}

// Whether every rank of `group` says `ok` (a sum over the group, so all ranks
// learn the same answer).
absl::StatusOr<bool> EveryRank(comm::Communicator& group, Device device, bool ok) {
  SEAM_ASSIGN_OR_RETURN(Tensor flag, Tensor::FromFloats({ok ? 1.0f : 0.0f}, {1}).To(device));
  SEAM_RETURN_IF_ERROR(group.AllReduce(flag));
  SEAM_ASSIGN_OR_RETURN(Tensor host, flag.To(Device::CPU()));
  return host.ToFloats()[0] == static_cast<float>(group.size());
}

// The group's candidate, or null (auto only) when a rank could not build its
// kernel, e.g. GPUs without peer access: the whole group then keeps NCCL.
absl::StatusOr<std::shared_ptr<IpcInputFusion>> MakeCandidate(SumGroup completes, comm::Communicator& group,
                                                              const std::string& name,
                                                              std::shared_ptr<comm::Store> store, Device device,
                                                              int64_t hidden, const IpcFusionOptions& options,
                                                              std::string* log) {
  comm::IpcAllReduceOptions ipc;
  ipc.timeout = options.timeout;
  absl::StatusOr<std::unique_ptr<comm::IpcAllReduceFusion>> kernel = comm::IpcAllReduceFusion::Create(
      comm::MakePrefixStore(name, store), group.rank(), group.size(), device.index, options.max_tokens, hidden, ipc);
  const bool always = options.mode == AllReduceFusionMode::kAlways;
  SEAM_ASSIGN_OR_RETURN(bool everyone, EveryRank(group, device, kernel.ok()));
  if (!everyone) {
    const std::string why = kernel.ok() ? "another rank could not build its kernel" : kernel.status().ToString();
    if (always) return absl::FailedPreconditionError(absl::StrCat("all-reduce fusion on ", name, ": ", why));
    AppendLine(log, absl::StrCat("all-reduce fusion on ", name, ": unavailable, NCCL only (", why, ")"));
    return std::shared_ptr<IpcInputFusion>();
  }
  comm::AllReduceNormTable table;
  if (!always) {
    SEAM_ASSIGN_OR_RETURN(table, MeasureAllReduceNorm(**kernel, group, device, PowersOfTwoUpTo(options.max_tokens)));
  }
  AppendLine(log, absl::StrCat("all-reduce fusion on ", name, " (", group.size(), " ranks, hidden ", hidden,
                               "): ", always ? "always" : DescribeTable(table, hidden)));
  return std::make_shared<IpcInputFusion>(completes, *std::move(kernel), std::move(table), always);
}

}  // namespace

absl::StatusOr<std::shared_ptr<IpcFusionProvider>> MakeIpcFusionProvider(const comm::ProcessGroups& groups,
                                                                         std::shared_ptr<comm::Store> store,
                                                                         Device device, int64_t hidden,
                                                                         const IpcFusionOptions& options,
                                                                         std::string* log) {
  if (options.mode == AllReduceFusionMode::kOff || !device.is_cuda() || groups.tp_size() < 2 ||
      hidden % 8 != 0 || hidden > comm::IpcAllReduceFusion::kMaxHidden) {
    return std::shared_ptr<IpcFusionProvider>();
  }
  if (options.max_tokens < 1 || options.max_tokens > comm::IpcAllReduceFusion::kMaxTokens) {
    return absl::InvalidArgumentError(absl::StrCat("all-reduce fusion max_tokens must be in [1, ",
                                                   comm::IpcAllReduceFusion::kMaxTokens, "], got ",
                                                   options.max_tokens));
  }
  std::vector<std::shared_ptr<IpcInputFusion>> candidates;
  SEAM_ASSIGN_OR_RETURN(auto tp, MakeCandidate(SumGroup::kTp, groups.tp(), "ipc.tp", store, device, hidden, options,
                                               log));
  if (tp == nullptr) return std::shared_ptr<IpcFusionProvider>();
  candidates.push_back(tp);
  if (groups.attn_tp_size() == groups.tp_size()) {
    // The same ranks in the same order: the TP group's kernel completes attention sums too.
    candidates.push_back(std::make_shared<IpcInputFusion>(SumGroup::kAttnTp, tp->kernel(), tp->table(),
                                                          options.mode == AllReduceFusionMode::kAlways));
  } else if (groups.attn_tp_size() > 1) {
    SEAM_ASSIGN_OR_RETURN(auto attn, MakeCandidate(SumGroup::kAttnTp, groups.attn_tp(),
                                                   absl::StrCat("ipc.attn_tp.dp", groups.dp_rank()), store, device,
                                                   hidden, options, log));
    if (attn != nullptr) candidates.push_back(attn);
  }
  return std::make_shared<IpcFusionProvider>(std::move(candidates));
}

}  // namespace seam::boundary
