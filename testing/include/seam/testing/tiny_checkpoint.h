// Tiny random Qwen3 / Qwen3-MoE / Nemotron-H / LongCat-Flash checkpoints in temporary
// directories, shared by the model tests (written once per process, removed
// at exit).
#pragma once

#include <string>
#include <vector>

#include "seam/core/tensor.h"
#include "seam/weights/model_config.h"

namespace seam::testing {

// vocab 128, hidden 64, 2 layers, 4 heads, 2 KV heads, head_dim 16,
// intermediate 96; MoE: 4 experts, top-2, moe_intermediate 32.
weights::ModelConfig TinyConfig(bool moe);
// The directory of the tiny checkpoint (written on first use).
const std::string& TinyCheckpointDir(bool moe);
// The same architecture with 4 layers; the MoE one mixes in a dense layer
// (mlp_only_layers = {1}), so pipeline cuts fall next to both FFN kinds.
weights::ModelConfig FourLayerConfig(bool moe);
const std::string& FourLayerCheckpointDir(bool moe);

// nemotron_h with the pattern "MM*--M*-" (two Mamba layers in a row, a Mamba
// layer before attention, two MLPs in a row): vocab 128, hidden 64; attention
// 8 heads / 4 KV heads of 8; Mamba 8 heads of 8, 4 groups, state 16, conv
// kernel 4, chunk 8; MLP intermediate 96; untied; time_step_limit
// [time_step_min, inf). Divides over attention TP 1, 2 and 4.
weights::ModelConfig TinyNemotronHConfig();
const std::string& TinyNemotronHCheckpointDir();
// The same with Mamba heads the chunked scan kernel tiles: 4 heads of 32,
// 2 groups, state 64.
weights::ModelConfig ScanTiledNemotronHConfig();
const std::string& ScanTiledNemotronHCheckpointDir();

// longcat_flash: vocab 128, hidden 64, 2 logical layers (4 MLA attentions),
// 4 heads, q_lora_rank 48, kv_lora_rank 32, nope 16, rope 8, v 16; dense
// MLPs of 96; 8 routed experts of 32 and 2 zero experts, top-2,
// routed_scaling_factor 2.5. Divides over TP 1, 2 and 4.
weights::ModelConfig TinyLongcatFlashConfig();
const std::string& TinyLongcatFlashCheckpointDir();

// qwen3 with vocab 16, hidden 8, 1 layer, 2 heads, 1 KV head, head_dim 4,
// intermediate 12, bf16, the other fields at ModelConfig's defaults: tensors
// small enough to check piece by piece (no checkpoint is written for it).
weights::ModelConfig MicroConfig();

// The benchmark model of the serving-under-load figures, not tiny: qwen3,
// 8 layers, hidden 4096, 32 heads / 8 KV heads of 128, intermediate 12288,
// vocab 32000, bf16 (3.35 GB of weights, 32 KiB of KV per token). For
// arithmetic on its sizes only; no checkpoint is written for it.
weights::ModelConfig ServingLoadConfig();

// max |a - b| / max |reference|: the error relative to the logits' scale.
double MaxRelativeError(const Tensor& got, const Tensor& reference);
// Deterministic prompt tokens in [1, vocab).
std::vector<int32_t> PromptTokens(int seed, int length, int vocab);

}  // namespace seam::testing
