// How big each rank's paged KV cache is. On the host it is a byte budget
// (--kv-cache-bytes). On a GPU it is what is left of a fraction of the GPU's
// memory (--kv-memory-fraction, as vLLM's gpu_memory_utilization) after this
// process's weights and a reserve for the activations of the largest step,
// unless a byte budget is given. Every rank of a group takes the least of
// their budgets, so the group's DP groups all hold the same number of blocks.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "seam/core/device.h"
#include "seam/core/dtype.h"
#include "seam/core/step_limits.h"
#include "seam/weights/model_config.h"

namespace seam::runtime {

struct KvSizing {
  // Bytes of each rank's cache (all its layers' k and v): always on the
  // host, and on GPUs unless from_gpu_memory.
  int64_t cache_bytes = kDefaultHostKvCacheBytes;
  // GPU ranks: size the cache from memory_fraction instead (the stage
  // server's default; in-process groups default to the byte budget).
  bool from_gpu_memory = false;
  // The share of the GPU's memory this process may fill in all.
  double memory_fraction = kDefaultKvMemoryFraction;
  // The largest step (token rows over all DP groups) a stage runs: sizes
  // the activation reserve, and a larger step is refused (StepPlan).
  int64_t max_step_tokens = kDefaultMaxStepTokens;
};

// An upper bound of the activation memory of one step of `tokens` tokens on
// one rank of a TP group of `tp` (attention TP `attn_tp`) in `dtype`: the
// hidden, residual and normed rows, q|k|v, attention output, the FFN's gate,
// up and activation (every routed expert's share for MoE), fp32 logits, plus
// a fixed 256 MiB for library workspaces (cuBLASLt, NCCL) and graphs.
int64_t ActivationReserveBytes(const weights::ModelConfig& config, int tp, int attn_tp, DType dtype,
                               int64_t tokens);

// What loading a rank took of its GPU: what the GPU lost meanwhile
// (`gpu_lost`), but no more than the rank's own memory pool grew plus 1 GiB
// for libraries (cuBLAS, NCCL), since another process on the same GPU
// (stages sharing one) may allocate meanwhile.
int64_t LoadedBytes(int64_t gpu_lost, int64_t pool_grew);

// The KV budget of one rank on `device`. `used_bytes` is what this process
// has taken on the GPU so far (weights and workspaces), `total_bytes` and
// `free_bytes` the GPU's. FAILED_PRECONDITION, with the figures, when
// nothing is left for the cache.
absl::StatusOr<int64_t> KvBudgetBytes(const KvSizing& sizing, Device device, int64_t used_bytes,
                                      int64_t total_bytes, int64_t free_bytes, int64_t activation_reserve_bytes);

// "1.5 GiB"-style text for logs and errors.
std::string FormatBytes(int64_t bytes);

}  // namespace seam::runtime
