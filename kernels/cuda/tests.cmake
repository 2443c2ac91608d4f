# GPU test of the CUDA kernels against the CPU reference; every test skips when
# no GPU is visible. Discovery runs at test time so building needs no GPU.
add_executable(cuda_kernels_test
  ${CMAKE_CURRENT_LIST_DIR}/tests/cuda_kernels_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/tests/cuda_attention_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/tests/cuda_decode_attention_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/tests/cuda_attention_input_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/tests/cuda_matmul_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/tests/cuda_sampling_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/tests/cuda_logit_edits_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/tests/cuda_mhc_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/tests/cuda_mamba_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/tests/cuda_moe_experts_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/tests/cuda_fused_experts_test.cc)
target_link_libraries(cuda_kernels_test PRIVATE seam_kernels CUDA::cudart GTest::gtest_main)
gtest_discover_tests(cuda_kernels_test DISCOVERY_MODE PRE_TEST)
