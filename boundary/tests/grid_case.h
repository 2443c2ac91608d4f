// One case of the exact-arithmetic grid: a synthetic stack run on every rank
// of a (attention DP, attention TP) layout through a communicator factory,
// compared bit for bit with the single-rank run over all rows.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "seam/comm/process_groups.h"
#include "seam/comm/recording_communicator.h"
#include "synthetic_stack.h"

namespace seam::boundary::testing {

struct GridCase {
  int dp = 1;
  int attn_tp = 1;
  BatchVariant variant = BatchVariant::kOrdinary;
  ReductionPolicy policy = ReductionPolicy::kAr;  // kAuto resolves as for qwen3
  std::vector<int64_t> dp_rows;
  int layers = 2;
  std::string pattern = "AF";  // stages per layer (see StackConfig::pattern)
  // Batch-time facts set on every rank's batch before the forward (e.g. rsv_usable).
  std::function<void(ForwardBatch&)> on_batch;
  // Every rank's (not the reference's) 'E' provider and finalize service.
  std::shared_ptr<FusionProvider> fusions;
  FinalizeNormService* finalize_norm = nullptr;
  int mhc_streams = 0;  // > 0: MHC update/read pairs over this many streams
  bool capture = false;  // also compare every capture with the reference's rows
  bool applied_at_exit = false;  // every update applied at its producer's exit
  bool reads_all_rows = false;   // attention reads (and the final read) declare reads_after_attn_tp_gather
  AttnTpGatherFn final_gather;   // every rank's (not the reference's) final-read gather
  bool gathering_reads = false;  // attention reads and the final read offer gathering reads
  bool ffn_reads_after_dp_gather = false;  // every FFN reads after the attention-DP gather
  bool output_transform = false;           // every dense FFN transforms its output (max(y, 0) / 2) before its update
  int cp = 1;                              // context-parallel ranks per DP group (tp = dp · cp · attn_tp)
  std::vector<int64_t> sequences;          // rows per sequence of the (one) DP group; empty: one sequence
  bool causal_mix = false;                 // attentions mix each sequence's earlier rows (StackConfig)
  std::string ToString() const;
};

// Equal, ragged and one-empty row patterns for `dp` groups.
std::vector<std::vector<int64_t>> GridRowPatterns(int dp);

// Runs `c` on tp = dp · cp · attn_tp rank threads whose groups come from
// `factory`. OK when every rank's output equals its rows of the single-rank
// reference bit for bit; otherwise the first failing rank's status.
absl::Status RunGridCase(const GridCase& c, const comm::CommunicatorFactory& factory);

bool BitEqual(const Tensor& a, const Tensor& b);

// This rank's rows of a reference tensor over all rows: its DP rows, or its
// attention-TP slice of them when `mine` has the slice's row count.
Tensor RowsOfReference(const Tensor& all, const Tensor& mine, const BatchRows& rows);
// Each capture of `got` equals its rows of the reference capture.
absl::Status SameCaptures(const AuxCollector& ref, const AuxCollector& got, const BatchRows& rows, const char* what);

// Calls of `kind` every group of `registry` logged, over all its ranks.
int CountCollectives(const comm::RecordingRegistry& registry, comm::CollectiveKind kind);
// Fixed and variable reduce-scatters, over every group and rank.
int ReduceScatters(const comm::RecordingRegistry& registry);

// Test-name fragment of a layout, variant and policy: "dp2_atp1_UNPADDED_rs_rsv".
std::string GridName(std::pair<int, int> layout, BatchVariant variant, ReductionPolicy policy);

}  // namespace seam::boundary::testing
