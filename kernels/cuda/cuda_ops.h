// CUDA launchers behind the ops of seam/kernels/ops.h (internal to kernels/).
// Same contracts as the public ops; arguments are already validated by the
// dispatcher (shapes, dtypes, all tensors on one CUDA device, contiguous).
// Each launches on kernels::CurrentStream() and returns the launch status.
// None synchronises with the host, so each can be captured in a CUDA graph.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "seam/core/tensor.h"
#include "seam/kernels/matmul_tuning.h"
#include "seam/kernels/moe_experts.h"
#include "seam/kernels/ops.h"

namespace seam::kernels::cuda {

// elementwise.cu, embedding.cu, norm.cu, activation.cu, rotary.cu
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

// matmul.cu (cuBLAS)
absl::Status Matmul(const Tensor& x, const Tensor& w, const Tensor& out);
// kernels::UseOwnMatmulWorkspace (stream.h).
absl::Status UseOwnMatmulWorkspace(void* stream);
// kernels::MatmulChoices (matmul_tuning.h).
std::vector<MatmulChoice> MatmulChoicesOnThread();
// head_matmul.cu (one strided-batched cuBLASLt GEMM)
absl::Status HeadMatmul(const Tensor& x, const Tensor& w, const Tensor& out);

// kv_cache_write.cu, attention.cu (which picks decode_attention*.cu or prefill_attention*.cu)
absl::Status WriteKvCache(const Tensor& k, const Tensor& v, const Tensor& slot_mapping, const Tensor& k_cache,
                          const Tensor& v_cache);
absl::Status PagedAttention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                            const AttentionBatch& batch, float scale, const Tensor& out);

// attention_input.cu
absl::Status QkvNormRopeCache(const Tensor& qkv, const Tensor& q_norm, const Tensor& k_norm, float eps,
                              const Tensor& positions, float theta, const Tensor& slot_mapping,
                              const Tensor& k_cache, const Tensor& v_cache, const Tensor& q_out);

// argmax.cu
absl::Status Argmax(const Tensor& logits, const Tensor& out);
// sampling.cu
absl::Status Softmax(const Tensor& x, const Tensor& out);
absl::Status Sample(const Tensor& logits, const SamplingParams& params, const Tensor& steps, const Tensor& out);
absl::Status TopK(const Tensor& x, int64_t k, const Tensor& values, const Tensor& indices);
// logit_edits.cu
absl::Status EditLogits(const Tensor& logits, const Tensor& at, const Tensor& by);
absl::Status TokenLogProbs(const Tensor& logits, const Tensor& tokens, const Tensor& out);

// moe.cu
absl::Status MoeRoute(const Tensor& logits, int64_t top_k, bool renormalize, const Tensor& weights,
                      const Tensor& ids);
absl::Status MoeRouteBiased(const Tensor& logits, const Tensor& bias, int64_t top_k, float scaling,
                            const Tensor& weights, const Tensor& ids);
absl::Status GatherRows(const Tensor& x, const Tensor& rows, const Tensor& out);
absl::Status ScatterAddRows(const Tensor& dst, const Tensor& src, const Tensor& rows, const Tensor& weights);
absl::Status SortRoutesByExpert(const Tensor& weights, const Tensor& ids);  // moe_experts.cu
absl::Status GroupByExpert(const Tensor& ids, const ExpertGroups& groups);
absl::Status ExpertMatmul(const Tensor& x, const Tensor& w, const ExpertGroups& groups, const Tensor& out);
// moe_fused_experts.cu; `kernel` already chosen (never kAuto).
absl::Status ExpertGateUpSilu(const Tensor& x, const Tensor& w, const ExpertGroups& groups, const Tensor& act,
                              ExpertKernel kernel);
absl::Status ExpertDown(const Tensor& act, const Tensor& w, const ExpertGroups& groups, const Tensor& out,
                        ExpertKernel kernel);
absl::Status MoeFinalize(const Tensor& expert_out, const Tensor& scales, const Tensor& out);
absl::Status IdentityExpertPairs(const Tensor& x, const Tensor& ids, int64_t first, bool copy_input,
                                 const Tensor& out);
absl::Status GatherPairs(const Tensor& x, const ExpertGroups& groups, const Tensor& out);
absl::Status ScatterPairs(const Tensor& src, const ExpertGroups& groups, const Tensor& out);

// activation.cu, mamba_conv.cu, mamba_scan.cu, gated_norm.cu (Mamba2 and the squared-ReLU MLP)
absl::Status ReluSquared(const Tensor& x, const Tensor& out);
absl::Status CausalConv1d(const Tensor& x, const Tensor& weight, const Tensor& bias, bool silu,
                          const Tensor& conv_state, const SequenceStates& seqs, const Tensor& out);
absl::Status SelectiveScan(const SelectiveScanParams& params);
absl::Status GatedRmsNorm(const Tensor& x, const Tensor& z, const Tensor& weight, int64_t group_size, float eps,
                          const Tensor& out);

}  // namespace seam::kernels::cuda
