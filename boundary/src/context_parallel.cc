// The zig-zag token mapping of context-parallel batches and the services a
// model's attention uses on them.
#include "seam/boundary/context_parallel.h"

#include "absl/strings/str_cat.h"
#include "cp_movement.h"
#include "row_movement.h"
#include "seam/boundary/forward_batch.h"
#include "seam/comm/communicator.h"
#include "seam/core/status.h"
#include "seam/kernels/ops.h"

namespace seam::boundary {

absl::StatusOr<CpRowMap> CpRowMap::Make(std::vector<int64_t> sequence_rows, int cp) {
  if (cp < 1) return absl::InvalidArgumentError(absl::StrCat("context-parallel size ", cp, " must be at least 1"));
  CpRowMap map;
  map.cp_ = cp;
  map.chunks_.resize(cp);
  int64_t begin = 0;
  for (size_t s = 0; s < sequence_rows.size(); ++s) {
    const int64_t n = sequence_rows[s];
    if (n < 0) return absl::InvalidArgumentError(absl::StrCat("sequence ", s, " has ", n, " rows"));
    const int64_t parts = 2 * cp;
    for (int c = 0; c < cp; ++c) {
      for (int64_t k : {int64_t{c}, parts - 1 - c}) {
        const int64_t lo = k * n / parts, hi = (k + 1) * n / parts;
        map.chunks_[c].push_back(CpChunk{static_cast<int>(s), begin + lo, lo, hi - lo});
      }
    }
    begin += n;
  }
  map.total_ = begin;
  map.sequence_rows_ = std::move(sequence_rows);
  return map;
}

int64_t CpRowMap::RowsOf(int c) const {
  int64_t n = 0;
  for (const CpChunk& k : chunks_[c]) n += k.rows;
  return n;
}

std::vector<int64_t> CpRowMap::Counts() const {
  std::vector<int64_t> counts;
  for (int c = 0; c < cp_; ++c) counts.push_back(RowsOf(c));
  return counts;
}

std::vector<int32_t> CpRowMap::NaturalRowsOf(int c) const {
  std::vector<int32_t> rows;
  for (const CpChunk& k : chunks_[c]) {
    for (int64_t i = 0; i < k.rows; ++i) rows.push_back(static_cast<int32_t>(k.begin + i));
  }
  return rows;
}

std::vector<int32_t> CpRowMap::RankMajorNaturalRows() const {
  std::vector<int32_t> rows;
  for (int c = 0; c < cp_; ++c) {
    const std::vector<int32_t> mine = NaturalRowsOf(c);
    rows.insert(rows.end(), mine.begin(), mine.end());
  }
  return rows;
}

std::vector<int32_t> CpRowMap::GatheredPlaceOfNatural() const {
  const std::vector<int32_t> order = RankMajorNaturalRows();
  std::vector<int32_t> place(order.size());
  for (size_t i = 0; i < order.size(); ++i) place[order[i]] = static_cast<int32_t>(i);
  return place;
}

namespace {
absl::StatusOr<Tensor> Upload(const std::vector<int32_t>& v, Device device) {
  return Tensor::FromInts(v, {static_cast<int64_t>(v.size())}).On(device);
}
}  // namespace

// Kinds of cached index tensors (key = kind · 1024 + rank).
enum { kTake = 0, kRestore = 1, kRankMajor = 2, kOnes = 3 };

#define SEAM_CP_CACHED(key, device, make)                                              \
  for (const auto& [k, t] : cache_) {                                                  \
    if (k == (key) && t.device() == (device)) return t;                                \
  }                                                                                    \
  SEAM_ASSIGN_OR_RETURN(Tensor made, (make));                                          \
  cache_.emplace_back((key), made);                                                    \
  return made;

absl::StatusOr<Tensor> CpRowMap::TakeIndex(int c, Device device) const {
  SEAM_CP_CACHED(kTake * 1024 + c, device, Upload(NaturalRowsOf(c), device));
}

absl::StatusOr<Tensor> CpRowMap::RestoreIndex(Device device) const {
  SEAM_CP_CACHED(kRestore * 1024, device, Upload(GatheredPlaceOfNatural(), device));
}

absl::StatusOr<Tensor> CpRowMap::RankMajorIndex(Device device) const {
  SEAM_CP_CACHED(kRankMajor * 1024, device, Upload(RankMajorNaturalRows(), device));
}

absl::StatusOr<Tensor> CpRowMap::Ones(int c, Device device) const {
  SEAM_CP_CACHED(kOnes * 1024 + c, device,
                 Tensor::FromFloats(std::vector<float>(RowsOf(c), 1.0f), {RowsOf(c)}).On(device));
}

#undef SEAM_CP_CACHED

absl::StatusOr<Tensor> TakeRowsByIndex(const Tensor& x, const Tensor& index) {
  Shape shape = x.shape();
  shape[0] = index.dim(0);
  Tensor out = Tensor::Empty(shape, x.dtype(), x.device());
  if (index.dim(0) == 0) return out;
  SEAM_ASSIGN_OR_RETURN(Tensor x2, (x.is_contiguous() ? x : x.Clone()).Reshape({x.rows(), x.row_numel()}));
  SEAM_ASSIGN_OR_RETURN(Tensor out2, out.Reshape({out.rows(), out.row_numel()}));
  SEAM_RETURN_IF_ERROR(kernels::GatherRows(x2, index, out2));
  return out;
}

std::vector<CpChunk> ComputeChunks(const ForwardBatch& batch) {
  if (batch.variant == BatchVariant::kContextParallel && batch.rows.cp_map() != nullptr) {
    return batch.rows.cp_map()->ChunksOf(batch.rows.topology().cp_rank());
  }
  std::vector<CpChunk> chunks;
  int64_t begin = 0;
  std::vector<int64_t> seqs = batch.sequence_rows;
  if (seqs.empty()) seqs = {batch.rows.my_dp_rows()};
  for (size_t s = 0; s < seqs.size(); ++s) {
    chunks.push_back(CpChunk{static_cast<int>(s), begin, 0, seqs[s]});
    begin += seqs[s];
  }
  return chunks;
}

absl::StatusOr<Tensor> ComputeRowIndex(const ForwardBatch& batch, Device device) {
  if (batch.variant != BatchVariant::kContextParallel || batch.rows.cp_map() == nullptr) return Tensor();
  return batch.rows.cp_map()->TakeIndex(batch.rows.topology().cp_rank(), device);
}

absl::StatusOr<Tensor> GatherCpRows(const Tensor& x, const BatchRows& rows, comm::Communicator* cp_group) {
  const CpRowMap& map = *rows.cp_map();
  if (map.cp() == 1) return x;
  SEAM_CHECK_MSG(cp_group != nullptr, "a context-parallel batch needs the attn_cp communicator");
  SEAM_ASSIGN_OR_RETURN(Tensor gathered, rows::GatherCounts(*cp_group, x, map.Counts()));
  SEAM_ASSIGN_OR_RETURN(Tensor restore, map.RestoreIndex(x.device()));
  return TakeRowsByIndex(gathered, restore);
}

absl::StatusOr<Tensor> TakeCpRows(const Tensor& natural, const BatchRows& rows) {
  const CpRowMap& map = *rows.cp_map();
  if (map.cp() == 1) return natural;
  SEAM_ASSIGN_OR_RETURN(Tensor index, map.TakeIndex(rows.topology().cp_rank(), natural.device()));
  return TakeRowsByIndex(natural, index);
}

absl::Status AddCpResidual(Tensor* c, const Tensor& r, const BatchRows& rows) {
  const CpRowMap& map = *rows.cp_map();
  const int me = rows.topology().cp_rank();
  if (!c->is_contiguous()) *c = c->Clone();
  if (map.cp() == 1) return kernels::AddInPlace(*c, r);
  if (r.rows() == 0) return absl::OkStatus();
  SEAM_ASSIGN_OR_RETURN(Tensor index, map.TakeIndex(me, c->device()));
  SEAM_ASSIGN_OR_RETURN(Tensor ones, map.Ones(me, c->device()));
  return kernels::ScatterAddRows(*c, r.is_contiguous() ? r : r.Clone(), index, ones);
}

absl::StatusOr<Tensor> ReduceScatterCpRows(comm::Communicator& group, const Tensor& c, const BatchRows& rows) {
  const CpRowMap& map = *rows.cp_map();
  SEAM_ASSIGN_OR_RETURN(Tensor order, map.RankMajorIndex(c.device()));
  SEAM_ASSIGN_OR_RETURN(Tensor rank_major, TakeRowsByIndex(c, order));
  return rows::ReduceScatterCounts(group, rank_major, map.Counts());
}

absl::StatusOr<Tensor> GatherContext(const Tensor& x, ForwardBatch& batch) {
  if (batch.variant != BatchVariant::kContextParallel) {
    if (x.rows() != batch.rows.my_dp_rows()) {
      return absl::InvalidArgumentError(absl::StrCat("context gather of ", x.rows(), " rows; the DP rows are ",
                                                     batch.rows.my_dp_rows()));
    }
    return x;
  }
  const int64_t mine = batch.rows.RowsOf(RowForm::kCpRows);
  if (x.rows() != mine) {
    return absl::InvalidArgumentError(
        absl::StrCat("context gather of ", x.rows(), " rows; this rank's context-parallel rows are ", mine));
  }
  return GatherCpRows(x, batch.rows, batch.comms.attn_cp);
}

}  // namespace seam::boundary
