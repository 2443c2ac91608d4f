// CPU implementations behind the ops of seam/kernels/ops.h (internal to kernels/).
// Same contracts as the public ops; shapes, dtypes and devices are already
// validated by the dispatcher. Checks that need the values of index tensors
// (slots, block tables, query starts) happen here and return INVALID_ARGUMENT.
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "seam/core/tensor.h"
#include "seam/kernels/latent_attention.h"
#include "seam/kernels/moe_experts.h"
#include "seam/kernels/ops.h"

namespace seam::kernels::cpu {

absl::Status Matmul(const Tensor& x, const Tensor& w, const Tensor& out);
absl::Status HeadMatmul(const Tensor& x, const Tensor& w, const Tensor& out);  // head_matmul.cc
absl::Status Embedding(const Tensor& ids, const Tensor& table, int64_t vocab_start, const Tensor& out);
absl::Status RmsNorm(const Tensor& x, const Tensor& weight, float eps, const Tensor& out);
absl::Status FusedAddRmsNorm(const Tensor& x, const Tensor& residual, const Tensor& weight, float eps,
                             const Tensor& out);
absl::Status MoeFinalizeAddRmsNorm(const Tensor& expert_out, const Tensor& scales, const Tensor& residual,
                                   const Tensor& weight, float eps, const Tensor& out);  // moe_finalize_norm
absl::Status SiluAndMul(const Tensor& input, const Tensor& out);
absl::Status RotaryEmbedding(const Tensor& q, const Tensor& k, const Tensor& positions, float theta,
                             int64_t rotary_dim);
absl::Status AddInPlace(const Tensor& dst, const Tensor& src);
absl::Status WriteKvCache(const Tensor& k, const Tensor& v, const Tensor& slot_mapping, const Tensor& k_cache,
                          const Tensor& v_cache);
absl::Status QkvNormRopeCache(const Tensor& qkv, const Tensor& q_norm, const Tensor& k_norm, float eps,
                              const Tensor& positions, float theta, const Tensor& slot_mapping,
                              const Tensor& k_cache, const Tensor& v_cache, const Tensor& q_out);
absl::Status PagedAttention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                            const AttentionBatch& batch, float scale, const Tensor& out);
// Checks the batch's values against q's rows and the cache's blocks: query_start
// runs from 0 to q_rows, 0 <= q_len <= context, every table entry a context
// uses names a block of the cache (INVALID_ARGUMENT naming the sequence).
absl::Status CheckAttentionBatch(const AttentionBatch& batch, int64_t q_rows, int64_t num_blocks,
                                 int64_t block_size);
absl::Status WriteLatentCache(const Tensor& latent, const Tensor& slot_mapping,  // latent_attention
                              const Tensor& latent_cache);
absl::Status PagedLatentAttention(const Tensor& q, const Tensor& latent_cache, const AttentionBatch& batch,
                                  float scale, const Tensor& out);
absl::Status Softmax(const Tensor& x, const Tensor& out);
absl::Status Argmax(const Tensor& logits, const Tensor& out);
absl::Status TopK(const Tensor& x, int64_t k, const Tensor& values, const Tensor& indices);
absl::Status Sample(const Tensor& logits, const SamplingParams& params, const Tensor& steps, const Tensor& out);
absl::Status EditLogits(const Tensor& logits, const Tensor& at, const Tensor& by);
absl::Status TokenLogProbs(const Tensor& logits, const Tensor& tokens, const Tensor& out);
absl::Status MoeRoute(const Tensor& logits, int64_t top_k, bool renormalize, const Tensor& weights,
                      const Tensor& ids);
absl::Status MoeRouteBiased(const Tensor& logits, const Tensor& bias, int64_t top_k, float scaling,
                            const Tensor& weights, const Tensor& ids);
absl::Status GatherRows(const Tensor& x, const Tensor& rows, const Tensor& out);
absl::Status ScatterAddRows(const Tensor& dst, const Tensor& src, const Tensor& rows, const Tensor& weights);
absl::Status SortRoutesByExpert(const Tensor& weights, const Tensor& ids);  // moe_experts
absl::Status GroupByExpert(const Tensor& ids, const ExpertGroups& groups);
absl::Status ExpertMatmul(const Tensor& x, const Tensor& w, const ExpertGroups& groups, const Tensor& out);
absl::Status ExpertGateUpSilu(const Tensor& x, const Tensor& w, const ExpertGroups& groups, const Tensor& act);
absl::Status ExpertDown(const Tensor& act, const Tensor& w, const ExpertGroups& groups, const Tensor& out);
absl::Status MoeFinalize(const Tensor& expert_out, const Tensor& scales, const Tensor& out);
absl::Status IdentityExpertPairs(const Tensor& x, const Tensor& ids, int64_t first, bool copy_input,
                                 const Tensor& out);
absl::Status GatherPairs(const Tensor& x, const ExpertGroups& groups, const Tensor& out);
absl::Status ScatterPairs(const Tensor& src, const ExpertGroups& groups, const Tensor& out);
absl::Status ReluSquared(const Tensor& x, const Tensor& out);                                      // activation
absl::Status CausalConv1d(const Tensor& x, const Tensor& weight, const Tensor& bias, bool silu,   // mamba_conv
                          const Tensor& conv_state, const SequenceStates& seqs, const Tensor& out);
absl::Status SelectiveScan(const SelectiveScanParams& params);                                     // mamba_scan
absl::Status GatedRmsNorm(const Tensor& x, const Tensor& z, const Tensor& weight, int64_t group_size,  // norm
                          float eps, const Tensor& out);

}  // namespace seam::kernels::cpu
