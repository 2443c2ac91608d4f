// The one-shot all-reduce + residual add + RMSNorm (comm::IpcAllReduceFusion)
// as an input fusion of a CUDA TP group: at an attention or FFN stage's input
// it completes a bf16 sum that a single all-reduce over the TP (or
// attention-TP) group would complete, together with the add and norm, in one
// kernel. Whether it runs for a batch follows a table measured on the group
// itself (MeasureAllReduceNorm): a token count is fused only where both paths
// were timed and the fused one was no slower (comm::ChooseFusedAllReduce).
//
// Every rank of a group must make the same choice, or one rank would wait in
// the kernel while another ran NCCL. The candidate therefore declines only on
// facts the group's ranks share: the batch's token count, the width, dtype and
// device kind, and the table, which MeasureAllReduceNorm averages over the
// group so that every rank holds the same one.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "seam/boundary/fusion.h"
#include "seam/comm/allreduce_choice.h"
#include "seam/comm/ipc_allreduce.h"
#include "seam/comm/process_groups.h"
#include "seam/comm/store.h"
#include "seam/core/device.h"

namespace seam::boundary {

enum class AllReduceFusionMode : uint8_t {
  kOff,     // never
  kAuto,    // measure both paths when the group starts, fuse where the fused one is no slower
  kAlways,  // fuse every batch the kernel takes (correctness runs and benchmarks)
};
const char* AllReduceFusionModeName(AllReduceFusionMode mode);  // "off", "auto", "always"
absl::StatusOr<AllReduceFusionMode> ParseAllReduceFusionMode(const std::string& text);

// One group's kernel and the table that decides for it.
class IpcInputFusion final : public InputFusion {
 public:
  IpcInputFusion(SumGroup completes, std::shared_ptr<comm::IpcAllReduceFusion> kernel, comm::AllReduceNormTable table,
                 bool always);
  std::string name() const override { return "ipc_one_shot_allreduce_add_rmsnorm"; }
  SumGroup completes() const override { return completes_; }
  // Declines (false) for anything but bf16 CUDA rows of the kernel's width,
  // 1..max_tokens of them, on a group of the kernel's size, and (unless
  // always) for a token count the table does not favour. DEADLINE_EXCEEDED
  // once an earlier call's peer wait passed its deadline.
  absl::StatusOr<bool> TryCompleteAddNorm(const Tensor& contribution, const Tensor& residual, const NormParams& norm,
                                          const Tensor& out, comm::Communicator& group) override;
  // Whether this candidate would run for `tokens` rows (the table's verdict, or always).
  bool Chooses(int64_t tokens) const;
  const comm::AllReduceNormTable& table() const { return table_; }
  const std::shared_ptr<comm::IpcAllReduceFusion>& kernel() const { return kernel_; }
  int64_t runs() const { return runs_.load(std::memory_order_relaxed); }  // sums this candidate completed

 private:
  SumGroup completes_;
  std::shared_ptr<comm::IpcAllReduceFusion> kernel_;
  comm::AllReduceNormTable table_;
  bool always_;
  std::atomic<int64_t> runs_{0};
};

// Offers its candidates at every stage's input.
class IpcFusionProvider final : public FusionProvider {
 public:
  explicit IpcFusionProvider(std::vector<std::shared_ptr<IpcInputFusion>> candidates);
  std::vector<std::shared_ptr<InputFusion>> InputFusions(const StagePlan& plan) const override;
  const std::vector<std::shared_ptr<IpcInputFusion>>& candidates() const { return candidates_; }
  int64_t runs() const;  // sums its candidates completed

 private:
  std::vector<std::shared_ptr<IpcInputFusion>> candidates_;
};

// Times, on every rank of `group` at once, the unfused path (group.AllReduce
// + kernels::FusedAddRmsNorm) and kernel.Run on bf16 rows of the kernel's
// width for each token count (the mean of `iters` back-to-back calls after a
// warm-up, on the thread's current stream), and returns the mean over the
// group's ranks, so every rank gets the same table. Every rank must call it
// with the same arguments.
absl::StatusOr<comm::AllReduceNormTable> MeasureAllReduceNorm(comm::IpcAllReduceFusion& kernel,
                                                              comm::Communicator& group, Device device,
                                                              const std::vector<int64_t>& token_counts,
                                                              int iters = 30);

struct IpcFusionOptions {
  AllReduceFusionMode mode = AllReduceFusionMode::kAuto;
  int64_t max_tokens = 256;                    // largest batch the kernel takes (decode-sized)
  absl::Duration timeout = absl::Seconds(30);  // rendezvous and every in-kernel peer wait
};

// Builds one TP rank's provider: a kernel for the TP group, and one for its
// attention-TP group when that is a smaller group of more than one rank,
// joined through `store` (fresh for this stage group; every rank calls this
// together), then measured unless mode is kAlways. Returns nullptr (no
// fusion) for kOff, a host device, a group of one rank, or a width the
// kernel does not take, and, in kAuto, when a rank of the TP group cannot
// build its kernel (e.g. GPUs without peer access: every rank of the group
// learns it and keeps NCCL; an attention-TP group that cannot is left out
// alone). Errors in kAlways when a kernel cannot be built, and when a
// measurement fails.
// `log`, when set, receives one line per measured group.
absl::StatusOr<std::shared_ptr<IpcFusionProvider>> MakeIpcFusionProvider(
    const comm::ProcessGroups& groups, std::shared_ptr<comm::Store> store, Device device, int64_t hidden,
    const IpcFusionOptions& options, std::string* log = nullptr);

// "tokens: fused/unfused µs (choice)" for each row of a table.
std::string DescribeTable(const comm::AllReduceNormTable& table, int64_t hidden);

}  // namespace seam::boundary
