# GPU test of the CUDA kernels against the CPU reference; every test skips when
# no GPU is visible. Where a GPU is visible when the tree is configured, each
# test is a ctest of its own (discovered at test time); elsewhere the binary
# is one ctest, so its ~1,100 skipping tests cost one process, not one each.
add_executable(cuda_kernels_test
  ${CMAKE_CURRENT_LIST_DIR}/tests/cuda_kernels_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/tests/cuda_attention_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/tests/cuda_decode_attention_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/tests/cuda_prefill_attention_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/tests/cuda_latent_attention_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/tests/cuda_attention_input_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/tests/cuda_matmul_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/tests/cuda_matmul_tuning_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/tests/cuda_head_matmul_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/tests/cuda_argmax_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/tests/cuda_sampling_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/tests/cuda_logit_edits_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/tests/cuda_mhc_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/tests/cuda_mamba_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/tests/cuda_moe_experts_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/tests/cuda_fused_experts_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/tests/cuda_zero_experts_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/tests/cuda_pdl_test.cc)
target_link_libraries(cuda_kernels_test PRIVATE seam_kernels CUDA::cudart GTest::gtest_main)
execute_process(COMMAND nvidia-smi -L RESULT_VARIABLE _seam_smi OUTPUT_VARIABLE _seam_gpus ERROR_QUIET)
if(_seam_smi EQUAL 0 AND _seam_gpus MATCHES "GPU ")
  gtest_discover_tests(cuda_kernels_test DISCOVERY_MODE PRE_TEST)
else()
  add_test(NAME cuda_kernels_test COMMAND cuda_kernels_test)
endif()
