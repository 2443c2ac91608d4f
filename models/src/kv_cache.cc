// KvCache: block allocation from a byte budget, block tables per sequence,
// the host plan and device tensors of a step, and the Mamba state slots
// that follow the sequences.
#include "seam/models/kv_cache.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "seam/core/progress.h"
#include "seam/core/status.h"

namespace seam::models {
namespace {

// A host i32 tensor moved to `device` when that is not the host.
absl::StatusOr<Tensor> OnDevice(const std::vector<int32_t>& values, const Shape& shape, Device device) {
  return Tensor::FromInts(values, shape).On(device);
}

}  // namespace

int64_t StateSequencesFor(const KvCacheOptions& options, int64_t bytes_per_sequence) {
  if (options.max_state_sequences > 0) return options.max_state_sequences;
  const double share = kDefaultStateShare * static_cast<double>(options.budget_bytes);
  const int64_t fits = static_cast<int64_t>(share) / std::max<int64_t>(bytes_per_sequence, 1);
  return std::clamp<int64_t>(fits, 1, kDefaultMaxStateSequences);
}

absl::StatusOr<std::unique_ptr<KvCache>> KvCache::Create(int64_t layers, int64_t local_kv_heads, int64_t head_dim,
                                                         const KvCacheOptions& options,
                                                         const MambaStateShape& state) {
  if (layers <= 0 || local_kv_heads <= 0 || head_dim <= 0 || options.block_size <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("KV cache: layers (", layers, "), kv heads (", local_kv_heads,
                                                   "), head_dim (", head_dim, ") and block_size (",
                                                   options.block_size, ") must be positive"));
  }
  return Allocate(layers, {local_kv_heads, head_dim}, 2, options, state);
}

absl::StatusOr<std::unique_ptr<KvCache>> KvCache::CreateLatent(int64_t layers, int64_t latent_dim,
                                                               const KvCacheOptions& options) {
  if (layers <= 0 || latent_dim <= 0 || options.block_size <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("latent KV cache: layers (", layers, "), latent_dim (",
                                                   latent_dim, ") and block_size (", options.block_size,
                                                   ") must be positive"));
  }
  SEAM_ASSIGN_OR_RETURN(std::unique_ptr<KvCache> cache, Allocate(layers, {latent_dim}, 1, options, {}));
  cache->latent_ = true;
  return cache;
}

absl::StatusOr<std::unique_ptr<KvCache>> KvCache::Allocate(int64_t layers, const Shape& row_shape,
                                                           int tensors_per_layer, const KvCacheOptions& options,
                                                           const MambaStateShape& state) {
  auto cache = std::unique_ptr<KvCache>(new KvCache(options));
  const int64_t per_layer_tensor = options.block_size * NumElements(row_shape) * DTypeSize(options.dtype);
  cache->bytes_per_block_ = tensors_per_layer * layers * per_layer_tensor;
  int64_t budget = options.budget_bytes;
  if (state.layers > 0) {
    const int64_t each = state.BytesPerSequence();
    const int64_t slots = StateSequencesFor(options, each);
    SEAM_ASSIGN_OR_RETURN(cache->states_, MambaStateCache::Create(state, slots, options.device));
    budget -= slots * each;
  }
  cache->num_blocks_ = std::max<int64_t>(0, budget) / cache->bytes_per_block_;
  if (cache->num_blocks_ <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("KV cache: a budget of ", options.budget_bytes,
                                                   " bytes holds no block (one block needs ",
                                                   cache->bytes_per_block_, " bytes)"));
  }
  Shape shape{cache->num_blocks_, options.block_size};
  shape.insert(shape.end(), row_shape.begin(), row_shape.end());
  const int64_t layer_bytes = tensors_per_layer * cache->num_blocks_ * per_layer_tensor;
  Progress progress(absl::StrCat("allocating the KV cache (", cache->num_blocks_, " blocks of ", options.block_size,
                                 " tokens on ", options.device.ToString(), ")"),
                    layers * layer_bytes, ProgressUnit::kBytes,
                    ProgressOptions{options.report_progress ? ProgressMode::kAuto : ProgressMode::kOff});
  for (int64_t l = 0; l < layers; ++l) {
    absl::StatusOr<Tensor> k = Tensor::TryEmpty(shape, options.dtype, options.device);
    absl::StatusOr<Tensor> v = k;
    if (k.ok() && tensors_per_layer == 2) v = Tensor::TryEmpty(shape, options.dtype, options.device);
    if (!v.ok()) {
      progress.Fail();
      return v.status();
    }
    cache->k_.push_back(std::move(*k));
    if (tensors_per_layer == 2) cache->v_.push_back(std::move(*v));
    progress.Advance(layer_bytes, absl::StrCat("layer ", l));
  }
  cache->refs_.assign(cache->num_blocks_, 0);
  cache->free_.reserve(cache->num_blocks_);
  for (int64_t b = cache->num_blocks_ - 1; b >= 0; --b) cache->free_.push_back(static_cast<int32_t>(b));
  return cache;
}

int64_t KvCache::Capacity(uint64_t sequence) const {
  auto it = tables_.find(sequence);
  return it == tables_.end() ? 0 : static_cast<int64_t>(it->second.size()) * options_.block_size;
}

int64_t KvCache::BlocksNeeded(const std::vector<CacheSpan>& spans) const {
  // A sequence may appear more than once; it needs blocks for its furthest span.
  std::map<uint64_t, int64_t> end_of;
  for (const CacheSpan& s : spans) end_of[s.sequence] = std::max(end_of[s.sequence], s.start + s.count);
  int64_t needed = 0;
  for (const auto& [sequence, end] : end_of) {
    auto it = tables_.find(sequence);
    const int64_t have = it == tables_.end() ? 0 : static_cast<int64_t>(it->second.size());
    needed += std::max<int64_t>(0, BlocksFor(end) - have);
  }
  return needed;
}

int64_t KvCache::StatesNeeded(const std::vector<CacheSpan>& spans) const {
  if (states_ == nullptr) return 0;
  std::vector<uint64_t> sequences;
  for (const CacheSpan& s : spans) sequences.push_back(s.sequence);
  return states_->SlotsNeeded(sequences);
}

absl::Status KvCache::Reserve(const std::vector<CacheSpan>& spans) {
  for (const CacheSpan& s : spans) {
    if (s.start < 0 || s.count < 0) {
      return absl::InvalidArgumentError(absl::StrCat("KV cache: sequence ", s.sequence, " has span start ", s.start,
                                                     " count ", s.count));
    }
  }
  const int64_t needed = BlocksNeeded(spans);
  if (needed > free_blocks()) {
    return absl::ResourceExhaustedError(absl::StrCat("KV cache full: the step needs ", needed, " more blocks, ",
                                                     free_blocks(), " of ", num_blocks_, " are free"));
  }
  if (states_ != nullptr) {  // before any block moves: all or nothing
    std::vector<uint64_t> sequences;
    for (const CacheSpan& s : spans) sequences.push_back(s.sequence);
    SEAM_RETURN_IF_ERROR(states_->Reserve(sequences));
  }
  for (const CacheSpan& s : spans) {
    std::vector<int32_t>& table = tables_[s.sequence];
    while (static_cast<int64_t>(table.size()) < BlocksFor(s.start + s.count)) {
      table.push_back(free_.back());
      refs_[free_.back()] = 1;
      free_.pop_back();
    }
  }
  return absl::OkStatus();
}

absl::Status KvCache::Free(uint64_t sequence) {
  auto it = tables_.find(sequence);
  if (it == tables_.end()) {
    return absl::NotFoundError(absl::StrCat("KV cache: sequence ", sequence, " holds no blocks"));
  }
  for (auto b = it->second.rbegin(); b != it->second.rend(); ++b) Unref(*b);
  tables_.erase(it);
  if (states_ != nullptr) states_->Free(sequence);
  return absl::OkStatus();
}

absl::StatusOr<CacheBatchPlan> KvCache::PlanBatch(const std::vector<CacheSpan>& spans, int64_t table_width) const {
  int64_t widest = 1;
  for (const CacheSpan& s : spans) {
    if (Capacity(s.sequence) < s.start + s.count) {
      return absl::FailedPreconditionError(absl::StrCat("KV cache: sequence ", s.sequence, " holds ",
                                                        Capacity(s.sequence), " tokens, the step needs ",
                                                        s.start + s.count, "; reserve it first"));
    }
    const int64_t blocks = static_cast<int64_t>(tables_.at(s.sequence).size());
    if (table_width > 0 && blocks > table_width) {
      return absl::OutOfRangeError(absl::StrCat("KV cache: sequence ", s.sequence, " spans ", blocks,
                                                " blocks, more than the ", table_width, " this batch allows"));
    }
    widest = std::max(widest, blocks);
  }
  CacheBatchPlan plan;
  plan.sequences = static_cast<int64_t>(spans.size());
  plan.table_width = table_width > 0 ? table_width : widest;
  plan.query_start.push_back(0);
  plan.block_tables.assign(plan.sequences * plan.table_width, 0);
  for (int64_t i = 0; i < plan.sequences; ++i) {
    const CacheSpan& s = spans[i];
    const std::vector<int32_t>& table = tables_.at(s.sequence);
    for (int64_t p = s.start; p < s.start + s.count; ++p) {
      plan.slot_mapping.push_back(static_cast<int32_t>(table[p / options_.block_size] * options_.block_size +
                                                       p % options_.block_size));
      plan.positions.push_back(static_cast<int32_t>(p));
    }
    plan.query_start.push_back(plan.query_start.back() + static_cast<int32_t>(s.count));
    plan.context_lens.push_back(static_cast<int32_t>(s.start + s.count));
    plan.state_slots.push_back(states_ == nullptr ? -1 : states_->SlotOf(s.sequence));
    std::copy(table.begin(), table.end(), plan.block_tables.begin() + i * plan.table_width);
  }
  plan.tokens = static_cast<int64_t>(plan.slot_mapping.size());
  return plan;
}

absl::StatusOr<CacheBatch> KvCache::BuildBatch(const std::vector<CacheSpan>& spans) const {
  SEAM_ASSIGN_OR_RETURN(CacheBatchPlan plan, PlanBatch(spans));
  const Device device = options_.device;
  const int64_t seqs = plan.sequences;
  CacheBatch batch;
  SEAM_ASSIGN_OR_RETURN(batch.slot_mapping, OnDevice(plan.slot_mapping, {plan.tokens}, device));
  SEAM_ASSIGN_OR_RETURN(batch.positions, OnDevice(plan.positions, {plan.tokens}, device));
  SEAM_ASSIGN_OR_RETURN(batch.attention.query_start, OnDevice(plan.query_start, {seqs + 1}, device));
  SEAM_ASSIGN_OR_RETURN(batch.attention.context_lens, OnDevice(plan.context_lens, {seqs}, device));
  SEAM_ASSIGN_OR_RETURN(batch.attention.block_tables, OnDevice(plan.block_tables, {seqs, plan.table_width}, device));
  SEAM_ASSIGN_OR_RETURN(batch.state_slots, OnDevice(plan.state_slots, {seqs}, device));
  return batch;
}

}  // namespace seam::models
