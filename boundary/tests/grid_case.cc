#include "grid_case.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "rank_threads.h"
#include "seam/comm/communicator.h"
#include "seam/comm/self_communicator.h"
#include "seam/core/status.h"

namespace seam::boundary::testing {
namespace {

// The single-rank reference output for all rows (its stack kept in `stack`).
absl::StatusOr<Tensor> Reference(const StackConfig& config, const Tensor& input,
                                 std::unique_ptr<SyntheticStack>& stack, const std::vector<int64_t>& sequences) {
  SEAM_ASSIGN_OR_RETURN(Topology topology, Topology::Make(1, 1, 0));
  SEAM_ASSIGN_OR_RETURN(stack, SyntheticStack::Build(config, topology));
  auto self = comm::MakeSelfCommunicator("tp");
  ForwardBatch batch(1, BatchVariant::kOrdinary, topology, {input.rows()});
  batch.comms = StageComms{self.get(), self.get(), self.get(), self.get()};
  SEAM_RETURN_IF_ERROR(batch.SetSequenceRows(sequences));
  return stack->Forward(batch, input);
}

}  // namespace

std::string GridCase::ToString() const {
  return absl::StrCat("dp=", dp, cp > 1 ? absl::StrCat(" cp=", cp) : "", " attn_tp=", attn_tp, " ",
                      BatchVariantName(variant), " ",
                      sequences.empty() ? "" : absl::StrCat("sequences [", absl::StrJoin(sequences, ", "), "] "),
                      causal_mix ? "causal " : "",
                      ReductionPolicyName(policy), " rows [", absl::StrJoin(dp_rows, ", "), "] layers ", layers,
                      " of ", pattern, mhc_streams > 0 ? absl::StrCat(" mhc ", mhc_streams) : "");
}

std::vector<std::vector<int64_t>> GridRowPatterns(int dp) {
  const std::vector<int64_t> equal = {6, 6, 6, 6}, ragged = {7, 3, 5, 2}, one_empty = {0, 5, 3, 4};
  return {std::vector<int64_t>(equal.begin(), equal.begin() + dp),
          std::vector<int64_t>(ragged.begin(), ragged.begin() + dp),
          std::vector<int64_t>(one_empty.begin(), one_empty.begin() + dp)};
}

bool BitEqual(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() &&
         (a.nbytes() == 0 || std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()) == 0);
}

absl::Status RunGridCase(const GridCase& c, const comm::CommunicatorFactory& factory) {
  StackConfig config{c.layers, ResolveReductionPolicy(c.policy, "qwen3"), static_cast<uint64_t>(c.layers),
                     c.pattern};
  config.mhc_streams = c.mhc_streams;
  config.capture = c.capture;
  config.applied_at_exit = c.applied_at_exit;
  config.reads_all_rows = c.reads_all_rows;
  config.gathering_reads = c.gathering_reads;
  config.ffn_reads_after_dp_gather = c.ffn_reads_after_dp_gather;
  config.output_transform = c.output_transform;
  config.causal_mix = c.causal_mix;
  int64_t total = 0;
  for (int64_t r : c.dp_rows) total += r;
  const Tensor all = StackInput(config.seed + 99, total);
  std::unique_ptr<SyntheticStack> ref;
  SEAM_ASSIGN_OR_RETURN(const Tensor expected, Reference(config, all, ref, c.sequences));
  StackConfig ranks_config = config;
  ranks_config.fusions = c.fusions;
  ranks_config.finalize_norm = c.finalize_norm;
  ranks_config.final_gather = c.final_gather;
  auto results = RunRanks(c.dp * c.cp * c.attn_tp, c.dp, factory,
                          [&](const Topology& t, const StageComms& comms) -> absl::Status {
                            SEAM_ASSIGN_OR_RETURN(auto stack, SyntheticStack::Build(ranks_config, t));
                            ForwardBatch batch(1, c.variant, t, c.dp_rows);
                            batch.comms = comms;
                            SEAM_RETURN_IF_ERROR(batch.SetSequenceRows(c.sequences));
                            if (c.on_batch) c.on_batch(batch);
                            SEAM_ASSIGN_OR_RETURN(Tensor out,
                                                  stack->Forward(batch, RankInput(all, batch.rows, c.variant)));
                            int64_t offset = 0;
                            for (int d = 0; d < t.dp_rank(); ++d) offset += c.dp_rows[d];
                            if (!BitEqual(out, expected.Rows(offset, c.dp_rows[t.dp_rank()]).Clone())) {
                              return absl::InternalError("output differs from the single-rank reference");
                            }
                            if (c.capture) {
                              SEAM_RETURN_IF_ERROR(SameCaptures(ref->captured(), stack->captured(), batch.rows, "prepare"));
                              SEAM_RETURN_IF_ERROR(SameCaptures(ref->gathered(), stack->gathered(), batch.rows, "gathered"));
                              SEAM_RETURN_IF_ERROR(
                                  SameCaptures(ref->final_captured(), stack->final_captured(), batch.rows, "final"));
                            }
                            return absl::OkStatus();
                          }, c.cp);
  for (size_t r = 0; r < results.size(); ++r) {
    if (!results[r].ok()) {
      return absl::Status(results[r].code(), absl::StrCat("rank ", r, ": ", results[r].message()));
    }
  }
  return absl::OkStatus();
}

Tensor RowsOfReference(const Tensor& all, const Tensor& mine, const BatchRows& rows) {
  int64_t offset = 0;
  for (int d = 0; d < rows.topology().dp_rank(); ++d) offset += rows.dp_rows()[d];
  if (mine.rows() == rows.my_dp_rows()) return all.Rows(offset, rows.my_dp_rows()).Clone();
  if (rows.cp_map() != nullptr && mine.rows() == rows.RowsOf(RowForm::kCpRows)) {  // this rank's CP rows
    return *TakeRowsByIndex(all, *rows.cp_map()->TakeIndex(rows.topology().cp_rank(), Device::CPU()));
  }
  return all.Rows(offset + rows.my_slice_begin(), rows.my_slice_rows()).Clone();
}

absl::Status SameCaptures(const AuxCollector& ref, const AuxCollector& got, const BatchRows& rows, const char* what) {
  if (ref.values().size() != got.values().size()) {
    return absl::InternalError(absl::StrCat(what, ": ", got.values().size(), " captures, the reference has ",
                                            ref.values().size()));
  }
  for (size_t i = 0; i < ref.values().size(); ++i) {
    if (!BitEqual(got.values()[i], RowsOfReference(ref.values()[i], got.values()[i], rows))) {
      return absl::InternalError(absl::StrCat(what, " capture ", i, " differs from the reference's rows"));
    }
  }
  return absl::OkStatus();
}

std::string GridName(std::pair<int, int> layout, BatchVariant variant, ReductionPolicy policy) {
  std::string p = ReductionPolicyName(policy);
  for (char& ch : p) {
    if (ch == '+') ch = '_';
  }
  return absl::StrCat("dp", layout.first, "_atp", layout.second, "_", BatchVariantName(variant), "_", p);
}

int CountCollectives(const comm::RecordingRegistry& registry, comm::CollectiveKind kind) {
  int count = 0;
  for (const auto& world : registry.Worlds()) {
    for (const auto& log : world->Logs()) {
      for (const comm::CollectiveRecord& call : log) count += call.kind == kind ? 1 : 0;
    }
  }
  return count;
}

int ReduceScatters(const comm::RecordingRegistry& registry) {
  return CountCollectives(registry, comm::CollectiveKind::kReduceScatter) +
         CountCollectives(registry, comm::CollectiveKind::kReduceScatterV);
}

}  // namespace seam::boundary::testing
