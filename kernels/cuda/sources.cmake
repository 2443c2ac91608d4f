# CUDA kernel sources of seam_kernels; included by kernels/CMakeLists.txt when
# the CUDA path is on. One file per op family; cuda_common.cuh is internal.
set(SEAM_KERNELS_CUDA_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/activation.cu
  ${CMAKE_CURRENT_LIST_DIR}/attention.cu
  ${CMAKE_CURRENT_LIST_DIR}/attention_input.cu
  ${CMAKE_CURRENT_LIST_DIR}/elementwise.cu
  ${CMAKE_CURRENT_LIST_DIR}/embedding.cu
  ${CMAKE_CURRENT_LIST_DIR}/matmul.cu
  ${CMAKE_CURRENT_LIST_DIR}/moe.cu
  ${CMAKE_CURRENT_LIST_DIR}/norm.cu
  ${CMAKE_CURRENT_LIST_DIR}/rotary.cu
  ${CMAKE_CURRENT_LIST_DIR}/sampling.cu)
