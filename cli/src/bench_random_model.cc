// bench_random_model.h: the config, and weights::WriteRandomCheckpoint.
#include "bench_random_model.h"

#include "seam/weights/random_checkpoint.h"

namespace seam::cli {

std::string CheckRandomModelSizes(const RandomModelSizes& s, int pp) {
  if (s.hidden < 1 || s.layers < pp || s.heads < 1 || s.kv_heads < 1 || s.heads % s.kv_heads != 0 || s.vocab < 8 ||
      (s.head_dim == 0 && s.hidden % s.heads != 0) || s.head_dim < 0 || s.intermediate < 0) {
    return "the random model needs --layers >= --pp, --kv-heads dividing --heads, --heads dividing --hidden "
           "(or a --head-dim) and --vocab >= 8";
  }
  return "";
}

weights::ModelConfig RandomQwen3Config(const RandomModelSizes& s, DType dtype) {
  weights::ModelConfig c;
  c.architecture = "qwen3";
  c.num_hidden_layers = s.layers;
  c.hidden_size = s.hidden;
  c.num_attention_heads = s.heads;
  c.num_key_value_heads = s.kv_heads;
  c.head_dim = s.head_dim > 0 ? s.head_dim : s.hidden / s.heads;
  c.intermediate_size = s.intermediate > 0 ? s.intermediate : 3 * s.hidden;
  c.vocab_size = s.vocab;
  c.dtype = dtype;
  c.bos_token_id = 0;
  c.eos_token_id = 1;
  return c;
}

absl::Status WriteRandomQwen3(const RandomModelSizes& s, DType dtype, const std::string& dir) {
  weights::RandomCheckpointOptions random;
  random.seed = 1;
  return weights::WriteRandomCheckpoint(RandomQwen3Config(s, dtype), random, dir);
}

}  // namespace seam::cli
