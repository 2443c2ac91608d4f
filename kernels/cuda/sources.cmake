# CUDA kernel sources of seam_kernels; included by kernels/CMakeLists.txt when
# the CUDA path is on. One file per op family (attention: one per kernel, sharing
# attention_common.cuh); the .cuh headers are internal.
set(SEAM_KERNELS_CUDA_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/activation.cu
  ${CMAKE_CURRENT_LIST_DIR}/allreduce_norm.cu
  ${CMAKE_CURRENT_LIST_DIR}/argmax.cu
  ${CMAKE_CURRENT_LIST_DIR}/attention.cu
  ${CMAKE_CURRENT_LIST_DIR}/attention_input.cu
  ${CMAKE_CURRENT_LIST_DIR}/decode_attention.cu
  ${CMAKE_CURRENT_LIST_DIR}/decode_attention_mma.cu
  ${CMAKE_CURRENT_LIST_DIR}/decode_attention_warp.cu
  ${CMAKE_CURRENT_LIST_DIR}/elementwise.cu
  ${CMAKE_CURRENT_LIST_DIR}/embedding.cu
  ${CMAKE_CURRENT_LIST_DIR}/gated_norm.cu
  ${CMAKE_CURRENT_LIST_DIR}/head_matmul.cu
  ${CMAKE_CURRENT_LIST_DIR}/kv_cache_write.cu
  ${CMAKE_CURRENT_LIST_DIR}/latent_attention.cu
  ${CMAKE_CURRENT_LIST_DIR}/latent_attention_mma.cu
  ${CMAKE_CURRENT_LIST_DIR}/latent_attention_simple.cu
  ${CMAKE_CURRENT_LIST_DIR}/latent_merge.cu
  ${CMAKE_CURRENT_LIST_DIR}/logit_edits.cu
  ${CMAKE_CURRENT_LIST_DIR}/mamba_chunk_scan.cu
  ${CMAKE_CURRENT_LIST_DIR}/mamba_conv.cu
  ${CMAKE_CURRENT_LIST_DIR}/mamba_scan.cu
  ${CMAKE_CURRENT_LIST_DIR}/matmul.cu
  ${CMAKE_CURRENT_LIST_DIR}/matmul_gemv.cu
  ${CMAKE_CURRENT_LIST_DIR}/matmul_mixed.cu
  ${CMAKE_CURRENT_LIST_DIR}/matmul_plan.cu
  ${CMAKE_CURRENT_LIST_DIR}/mhc.cu
  ${CMAKE_CURRENT_LIST_DIR}/moe.cu
  ${CMAKE_CURRENT_LIST_DIR}/moe_experts.cu
  ${CMAKE_CURRENT_LIST_DIR}/moe_expert_gemv.cu
  ${CMAKE_CURRENT_LIST_DIR}/moe_expert_mma.cu
  ${CMAKE_CURRENT_LIST_DIR}/moe_fused_experts.cu
  ${CMAKE_CURRENT_LIST_DIR}/moe_finalize_norm.cu
  ${CMAKE_CURRENT_LIST_DIR}/norm.cu
  ${CMAKE_CURRENT_LIST_DIR}/prefill_attention.cu
  ${CMAKE_CURRENT_LIST_DIR}/prefill_attention_mma.cu
  ${CMAKE_CURRENT_LIST_DIR}/prefill_attention_wmma.cu
  ${CMAKE_CURRENT_LIST_DIR}/rotary.cu
  ${CMAKE_CURRENT_LIST_DIR}/sampling.cu
  ${CMAKE_CURRENT_LIST_DIR}/split_workspace.cu)
# The kernels added for the MoE and Mamba2 work carry line info for the
# profiler (per file, so the rest of the build keeps its cached objects).
set_source_files_properties(
  ${CMAKE_CURRENT_LIST_DIR}/latent_attention_mma.cu
  ${CMAKE_CURRENT_LIST_DIR}/latent_merge.cu
  ${CMAKE_CURRENT_LIST_DIR}/mamba_chunk_scan.cu
  ${CMAKE_CURRENT_LIST_DIR}/moe_expert_gemv.cu
  ${CMAKE_CURRENT_LIST_DIR}/moe_expert_mma.cu
  ${CMAKE_CURRENT_LIST_DIR}/moe_fused_experts.cu
  PROPERTIES COMPILE_OPTIONS "$<$<COMPILE_LANGUAGE:CUDA>:-lineinfo>")
