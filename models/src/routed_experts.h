// The routed experts of a MoE block on one TP rank, stacked on the device
// (each expert's gate rows then its up rows [E, 2·I/tp, H]; its down
// projection [E, H, I/tp]), and how a batch's routes run through them:
// sorted by expert, grouped by expert on the device, then fused, grouped or
// one by one as ModelOptions::moe_experts and the batch's size choose. Under
// MoeExperts::kAuto on CUDA, fused or grouped is chosen per batch row count
// from both paths timed at load on this layer's weights (expert_path_choice.h:
// once per shape in the process, the table logged at info).
// Qwen3-MoE's block and LongCat-Flash's MoE share it; their routers differ.
// Private to the models library.
#pragma once

#include <cstdint>
#include <functional>
#include <utility>

#include "absl/status/statusor.h"
#include "seam/core/tensor.h"
#include "seam/kernels/moe_experts.h"
#include "src/expert_path_choice.h"
#include "src/load_context.h"

namespace seam::models::internal {

// A batch's expert outputs, one slot per route, and the routes' weights.
struct ExpertSlots {
  Tensor expert_out;  // [N, K, H]: slot k of a row holds its k-th route by ascending expert id
  Tensor scales;      // f32 [N, K]: the routes' weights in the same order
};

class RoutedExperts {
 public:
  // Expert e's [gate | up] rows [2·I/tp, H] and down columns [H, I/tp] of
  // this rank, on the host in the compute dtype.
  using HostExpert = std::function<absl::StatusOr<std::pair<Tensor, Tensor>>(int64_t e)>;

  RoutedExperts() = default;
  // Stacks `experts` experts read by `expert` on the model's device and
  // plans how batches run (up to `top_k` routes per row, drawn by the router
  // from `route_ids` ids, those ≥ experts in no group; 0: experts).
  static absl::StatusOr<RoutedExperts> Load(const LoadContext& ctx, int64_t experts, int64_t top_k,
                                            const HostExpert& expert, int64_t route_ids = 0);

  int64_t experts() const { return gate_up_.dim(0); }
  // The most rows a batch may have to run on the device with no host round
  // trip (a CUDA graph may hold the step); 0: never.
  int64_t grouped_max_rows() const { return grouped_pairs_ / top_k_; }

  // x [N, H]; a router's routes, weights f32 [N, K] and ids i32 [N, K] (ids
  // distinct within a row, K the top_k), each row sorted by expert id in
  // place. The pairs whose id is < experts() run through their expert; the
  // slots of the others (ids ≥ experts(): in no group) are left unwritten
  // for the caller to fill. No host round trip for a batch of at most
  // grouped_max_rows() rows.
  absl::StatusOr<ExpertSlots> Run(const Tensor& x, const Tensor& weights, const Tensor& ids) const;

  // How a batch of `rows` rows at most grouped_max_rows() runs: fused or
  // grouped (the timed table under kAuto on CUDA, else the load's choice).
  ExpertPath PathFor(int64_t rows) const;
  // The timed choices (empty unless kAuto on CUDA timed them).
  const ExpertPathTable& path_table() const { return table_; }

 private:
  bool Grouped(const Tensor& x) const { return x.rows() <= grouped_max_rows(); }
  // One grouped batch through `path` into buffers of its pairs (gate_up
  // [P, 2·I/tp] is scratch for the grouped path only; act [P, I/tp]; out
  // [P, H] in pair order): no allocation, no host round trip.
  absl::Status RunGroupedOn(const Tensor& x, const kernels::ExpertGroups& groups, ExpertPath path,
                            const Tensor& gate_up, const Tensor& act, const Tensor& out) const;
  // Both paths timed on this layer's weights at TimedRowBuckets(grouped_max_rows())
  // rows with random routes of top_k distinct ids out of `route_ids`, each
  // replayed from a CUDA graph of its own stream (routed_experts_timing.cc).
  absl::StatusOr<ExpertPathTable> TimePaths(int64_t route_ids) const;

  Tensor gate_up_, down_;      // stacked: [E, 2·I/tp, H], [E, H, I/tp]
  int64_t top_k_ = 1;
  int64_t grouped_pairs_ = 0;  // batches of at most this many routes run grouped (0: none)
  bool fused_ = false;         // grouped batches run the fused expert kernels (else ExpertMatmul)
  kernels::ExpertKernel kernel_ = kernels::ExpertKernel::kAuto;  // theirs
  ExpertPathTable table_;      // when not empty, it chooses per batch instead of fused_
};

}  // namespace seam::models::internal
