// KvCache: one rank's paged key/value cache. Every layer owns a k and a v
// tensor [num_blocks, block_size, local_kv_heads, head_dim], or, for
// multi-head latent attention (CreateLatent), one latent tensor
// [num_blocks, block_size, latent_dim] (kernels/latent_attention.h); a sequence owns
// a list of blocks (its block table) that grows as its tokens are reserved.
// The number of blocks comes from a byte budget. A rank with Mamba layers
// also holds their per-sequence recurrent state (MambaStateCache) out of the
// same budget: a sequence takes a state slot when its first span is reserved
// and returns it with its blocks. Prefix caching: a block may also be
// cached under an id the coordinator names (Publish), and a new sequence may
// start with cached blocks as its first ones (Share); a block returns to the
// free list once no sequence holds it and it is not cached (Evict). Owned
// and used by one rank thread; not thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "seam/core/device.h"
#include "seam/core/dtype.h"
#include "seam/core/step_limits.h"
#include "seam/core/tensor.h"
#include "seam/kernels/ops.h"
#include "seam/models/mamba_state_cache.h"

namespace seam::models {

struct KvCacheOptions {
  int64_t budget_bytes = int64_t{64} << 20;  // bytes for all layers' k and v together
  int64_t block_size = kDefaultKvBlockSize;  // tokens per block
  DType dtype = DType::kF32;
  Device device = Device::CPU();
  // Show the allocation as a Progress (seam/core/progress.h) over its bytes;
  // one rank of a group sets it.
  bool report_progress = false;
  // Sequences the Mamba state holds at once (ranks with Mamba layers only).
  // 0: StateSequencesFor's share of the budget (kDefaultStateShare).
  int64_t max_state_sequences = 0;
};

// The Mamba state slots a cache of `options` holds when each sequence's
// state takes `bytes_per_sequence`: max_state_sequences when given, else as
// many as kDefaultStateShare of the budget holds, between 1 and
// kDefaultMaxStateSequences (seam/core/step_limits.h). The KV blocks get
// the rest of the budget.
int64_t StateSequencesFor(const KvCacheOptions& options, int64_t bytes_per_sequence);

// The part of one sequence a step runs: tokens [start, start + count).
struct CacheSpan {
  uint64_t sequence = 0;
  int64_t start = 0;
  int64_t count = 0;
};

// What attention needs for one step's tokens, on the cache's device.
struct CacheBatch {
  Tensor slot_mapping;              // i32 [T]: flat slot of every token of the step
  Tensor positions;                 // i32 [T]: position of every token
  kernels::AttentionBatch attention;  // query_start, context_lens, block_tables
  Tensor state_slots;               // i32 [S]: each sequence's Mamba state slot (-1: none)
};

// The host form of a CacheBatch (what BuildBatch uploads): block tables are
// table_width wide, zero-padded.
struct CacheBatchPlan {
  std::vector<int32_t> slot_mapping, positions, query_start, context_lens, block_tables, state_slots;
  int64_t tokens = 0, sequences = 0, table_width = 0;
};

class KvCache {
 public:
  // INVALID_ARGUMENT when a size is not positive or the budget holds no block
  // (the message names the bytes one block needs) once the Mamba state
  // (`state`, when it has layers) took its share.
  static absl::StatusOr<std::unique_ptr<KvCache>> Create(int64_t layers, int64_t local_kv_heads, int64_t head_dim,
                                                         const KvCacheOptions& options,
                                                         const MambaStateShape& state = {});

  // A latent cache: per layer one row of `latent_dim` entries per token
  // (MLA's normalized compressed kv, then its roped key part) shared by every
  // head, paged as above. A block costs layers · block_size · latent_dim
  // elements, so the budget holds that many more tokens than a GQA cache.
  static absl::StatusOr<std::unique_ptr<KvCache>> CreateLatent(int64_t layers, int64_t latent_dim,
                                                               const KvCacheOptions& options);

  int64_t layers() const { return static_cast<int64_t>(k_.size()); }
  bool is_latent() const { return latent_; }
  // The latent tensor of `layer` (a latent cache only).
  const Tensor& latent(int64_t layer) const { return k_[layer]; }
  int64_t num_blocks() const { return num_blocks_; }
  int64_t block_size() const { return options_.block_size; }
  int64_t free_blocks() const { return static_cast<int64_t>(free_.size()); }
  int64_t bytes_per_block() const { return bytes_per_block_; }
  const Tensor& k(int64_t layer) const { return k_[layer]; }
  const Tensor& v(int64_t layer) const { return v_[layer]; }

  // The Mamba state, or null on a rank without Mamba layers.
  const MambaStateCache* states() const { return states_.get(); }
  // State slots still to take so every span's sequence has one (0 without state).
  int64_t StatesNeeded(const std::vector<CacheSpan>& spans) const;

  bool Has(uint64_t sequence) const { return tables_.count(sequence) != 0; }
  // Tokens the blocks of `sequence` can hold (0 for an unknown sequence).
  int64_t Capacity(uint64_t sequence) const;
  // Blocks still to allocate so every span fits (sequences added as needed).
  int64_t BlocksNeeded(const std::vector<CacheSpan>& spans) const;
  // Adds unknown sequences and grows each so that its span fits; all or
  // nothing. RESOURCE_EXHAUSTED "KV cache full: the step needs N more blocks,
  // M of K are free" when the blocks do not suffice, or MambaStateCache's
  // when its slots do not. Idempotent for spans that already fit.
  absl::Status Reserve(const std::vector<CacheSpan>& spans);
  // Returns the sequence's blocks; NOT_FOUND for an unknown sequence.
  absl::Status Free(uint64_t sequence);

  // Prefix caching (kv_cache_sharing.cc). Cached blocks are named by the
  // coordinator's ids; each rank maps them to its own blocks.
  // Starts `sequence` (unknown: FAILED_PRECONDITION otherwise) with the
  // cached blocks `ids` as its first blocks; NOT_FOUND naming an id that is
  // not cached. All or nothing.
  absl::Status Share(uint64_t sequence, const std::vector<uint64_t>& ids);
  // Caches block `index` of `sequence`'s table as `id`. NOT_FOUND for an
  // unknown sequence, OUT_OF_RANGE for an index past its table,
  // ALREADY_EXISTS for an id cached already.
  absl::Status Publish(uint64_t sequence, int64_t index, uint64_t id);
  // Drops cached block `id`; its block is free once no sequence holds it.
  // NOT_FOUND for an id that is not cached.
  absl::Status Evict(uint64_t id);
  int64_t cached_blocks() const { return static_cast<int64_t>(cached_.size()); }

  // Slot mapping, positions and attention batch of a step whose spans were
  // reserved (FAILED_PRECONDITION naming a span that does not fit).
  absl::StatusOr<CacheBatch> BuildBatch(const std::vector<CacheSpan>& spans) const;
  // The same on the host. table_width 0 = the widest table of the step;
  // otherwise every table must fit in it (OUT_OF_RANGE naming the sequence).
  absl::StatusOr<CacheBatchPlan> PlanBatch(const std::vector<CacheSpan>& spans, int64_t table_width = 0) const;
  const KvCacheOptions& options() const { return options_; }

 private:
  KvCache(KvCacheOptions options) : options_(options) {}
  // Allocates `tensors_per_layer` (1 or 2) tensors of `row_shape` per token per layer.
  static absl::StatusOr<std::unique_ptr<KvCache>> Allocate(int64_t layers, const Shape& row_shape,
                                                           int tensors_per_layer, const KvCacheOptions& options,
                                                           const MambaStateShape& state);
  int64_t BlocksFor(int64_t tokens) const { return (tokens + options_.block_size - 1) / options_.block_size; }

  KvCacheOptions options_;
  int64_t num_blocks_ = 0;
  int64_t bytes_per_block_ = 0;
  bool latent_ = false;
  std::vector<Tensor> k_, v_;  // a latent cache: its tensors in k_, v_ empty
  // Drops one holder of `block`; at none it goes back to free_.
  void Unref(int32_t block);

  std::vector<int32_t> free_;  // a stack; lowest block ids are handed out first
  std::vector<int32_t> refs_;  // per block: the tables holding it, +1 while cached
  std::map<uint64_t, int32_t> cached_;  // the coordinator's cached block id -> block
  std::map<uint64_t, std::vector<int32_t>> tables_;
  std::unique_ptr<MambaStateCache> states_;
};

}  // namespace seam::models
