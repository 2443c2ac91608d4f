// Which batch variant a forward runs as: the one decision a stage group
// makes per batch from its own configuration and the batch's row counts
// (which every stage of a pipeline sees alike, so every stage decides the
// same). A pure function: tests drive it without ranks.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "seam/boundary/forward_batch.h"
#include "seam/boundary/layout.h"

namespace seam::boundary {

enum class VariantMode : uint8_t {
  kAuto,        // per batch: unpadded / input-scattered / ordinary (below)
  kSequenceParallel,  // every batch of a TP group sequence parallel (configured)
  kContextParallel,   // every prefill batch context parallel, the others as kAuto
  kFixed,       // every batch the `fixed` variant (checks and tests)
};

struct VariantChoiceOptions {
  VariantMode mode = VariantMode::kAuto;
  BatchVariant fixed = BatchVariant::kOrdinary;  // kFixed only
  // kAuto: a batch whose largest DP group has at least this many rows (a
  // large prefill) keeps its input scattered over attention TP, so each
  // rank reads and updates only its slice of the residual.
  int64_t scatter_input_rows = 1024;
  // kAuto on a topology with CP ranks (attn_cp > 1): a prefill batch whose
  // DP rows number at least this many runs CONTEXT_PARALLEL. Decode batches
  // never do.
  int64_t cp_min_rows = 1024;
};

// "auto", "sequence-parallel" / "sp", "context-parallel" / "cp", or
// one variant's name ("ordinary", "unpadded", "input-scattered") for kFixed.
// (A fixed CONTEXT_PARALLEL for every batch, decode included, is
// VariantMode::kFixed set directly.)
absl::StatusOr<VariantChoiceOptions> ParseVariantChoice(const std::string& text);
std::string VariantChoiceName(const VariantChoiceOptions& options);

// INVALID_ARGUMENT for a configuration no batch of `topology` can run (a
// fixed UNPADDED with attention DP; context-parallel batches with attention
// DP; input-scattered or sequence-parallel batches with CP ranks).
absl::Status ValidateVariantChoice(const VariantChoiceOptions& options, const Topology& topology);

// The variant of a batch with `dp_rows` rows per attention-DP group. kAuto:
// with one TP rank, ORDINARY; else UNPADDED when the rows of the one DP
// group do not divide over attention TP (no padding rows); else
// INPUT_SCATTERED for a large batch with attention TP > 1; else ORDINARY.
// With CP ranks (attn_cp > 1) kAuto runs a prefill batch (`prefill`: some
// sequence brings more than one token) of at least cp_min_rows rows, and
// kContextParallel every prefill batch, as CONTEXT_PARALLEL; the others
// ORDINARY, or UNPADDED when their rows do not divide over attention TP.
BatchVariant ChooseBatchVariant(const VariantChoiceOptions& options, const Topology& topology,
                                const std::vector<int64_t>& dp_rows, bool prefill = true);

}  // namespace seam::boundary
