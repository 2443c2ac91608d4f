// The least work a model's steps must do, from its configuration alone: the
// bytes a decode step must move (weights, every sequence's KV over its
// context, Mamba state, the routed experts a batch touches) and the FLOPs of
// a prefill. Benchmarks divide these by a bandwidth or a matmul rate measured
// in the same run (measured_peaks.h) to state each figure against its floor.
// A StepFloor is an immutable value: thread-safe.
//
// Every figure is for one rank of the layout in `StepFloorOptions`: a rank of
// a TP group reads 1/tp of each MLP or expert matrix and of the lm_head,
// 1/attn_tp (tp / attn_dp) of each attention or Mamba matrix, norms, vectors
// and the MoE router whole; it holds the KV heads and Mamba heads of its
// attention-TP share (a KV head is replicated when there are fewer KV heads
// than attention-TP ranks) for 1/attn_dp of the sequences. A stage is the
// layer range [first_layer, end_layer); the stage holding the last layer also
// reads the final norm and the lm_head.
#pragma once

#include <cstdint>

#include "seam/core/dtype.h"
#include "seam/weights/model_config.h"

namespace seam::runtime {

struct StepFloorOptions {
  DType weight_dtype = DType::kBF16;  // matrices and norms (Mamba's conv taps, dt_bias, A and D are fp32)
  DType cache_dtype = DType::kBF16;   // KV cache elements (Mamba state is fp32)
  int tp = 1;
  int attn_dp = 1;
  int64_t first_layer = 0;
  int64_t end_layer = -1;  // -1: the model's last layer is included
};

// The bytes one decode step moves on one rank.
struct DecodeStepBytes {
  double weights = 0;  // every weight the step reads once, the routed experts included
  double experts = 0;  // of `weights`: the routed experts' share
  double kv = 0;       // each sequence's K and V over its context read, the new token's written
  double state = 0;    // Mamba conv and SSM state read and written back, once per sequence
  double total() const { return weights + kv + state; }
};

// The FLOPs of prefilling one prompt on one rank.
struct PrefillFlops {
  double matmul = 0;     // 2 x parameters each token touches x tokens (lm_head on the last row only)
  double attention = 0;  // 4 x (query, key) pairs x heads x head_dim per attention layer (QK^T and PV)
  double total() const { return matmul + attention; }
};

// The floor of one model on one layout: the checkpoint's tensor layout read
// once (Of), then every step's figure in constant time.
class StepFloor {
 public:
  static StepFloor Of(const weights::ModelConfig& config, const StepFloorOptions& options);

  // A decode step of `batch` sequences (one new token each) attending
  // `context_tokens` tokens in all (the sum over sequences of the context
  // each attends, its new token included). Every rank's MoE layers see the
  // whole batch (ExpectedRoutedExpertsTouched of each layer's experts: zero
  // experts read nothing); its KV and state are its attention-DP group's
  // share of the sequences.
  DecodeStepBytes DecodeStep(int64_t batch, int64_t context_tokens) const;

  // A prompt of `tokens` new tokens after `cached_tokens` already in the
  // cache (a prefix computed before): causal attention pairs are
  // tokens x cached + tokens x (tokens + 1) / 2. A prompt's attention runs in
  // one attention-DP group: averaged over the groups a load spreads its
  // prompts over, a rank does 1/tp of it. The Mamba scan and the elementwise
  // work are left out (small against the matmuls).
  PrefillFlops Prefill(int64_t tokens, int64_t cached_tokens = 0) const;

  // KV bytes one token of context holds on one rank: attention layers of the
  // stage x K and V x the rank's KV heads x head_dim x the cache dtype's
  // size. For the 8-layer hidden-4096 Qwen3 (8 KV heads of 128) in bf16: 32 KiB.
  double kv_bytes_per_token() const { return kv_per_token_; }
  // One sequence's Mamba conv and SSM state on one rank (fp32); 0 without Mamba layers.
  double state_bytes_per_sequence() const { return state_per_sequence_; }

 private:
  StepFloorOptions options_;
  int64_t experts_ = 0, zero_experts_ = 0, top_k_ = 0;
  double dense_bytes_ = 0;          // weights a step reads whatever its batch
  double all_expert_bytes_ = 0;     // every routed expert of the stage's MoE layers
  double embedding_row_bytes_ = 0;  // one embedding row (first stage, untied)
  double kv_per_token_ = 0, state_per_sequence_ = 0;
  double prefill_params_per_token_ = 0, prefill_last_row_params_ = 0;
  double attention_flops_per_pair_ = 0;  // 4 x heads x head_dim x attention layers / tp
};

// Expected distinct experts that `rows` rows each routing to top_k of
// `experts` touch under uniform routing: E * (1 - (1 - k/E)^rows); top_k at
// one row, at most E.
double ExpectedExpertsTouched(int64_t experts, int64_t top_k, int64_t rows);

// The same with `zero_experts` zero-computation experts beside the E routed
// ones (LongCat-Flash): each row picks top_k of E + Z uniformly, and only
// the routed experts picked have weights to read:
// E * (1 - (1 - k/(E + Z))^rows). Z = 0 is ExpectedExpertsTouched.
double ExpectedRoutedExpertsTouched(int64_t experts, int64_t zero_experts, int64_t top_k, int64_t rows);

}  // namespace seam::runtime
