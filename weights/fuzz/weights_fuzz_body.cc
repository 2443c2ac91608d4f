// Properties of the checkpoint parsers on arbitrary bytes; see the header.
#include "fuzz/weights_fuzz_body.h"

#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"
#include "seam/weights/model_config.h"
#include "seam/weights/safetensors.h"

namespace seam::weights::fuzz {
namespace {

std::string_view View(absl::string_view bytes) { return std::string_view(bytes.data(), bytes.size()); }

}  // namespace

absl::StatusCode SafetensorsCode(absl::string_view bytes) {
  return ParseSafetensorsLayout(View(bytes), "fuzz.safetensors").status().code();
}

absl::Status CheckSafetensorsProperties(absl::string_view bytes) {
  absl::StatusOr<SafetensorsLayout> layout = ParseSafetensorsLayout(View(bytes), "fuzz.safetensors");
  if (!layout.ok()) {
    const absl::StatusCode code = layout.status().code();
    if (code == absl::StatusCode::kDataLoss || code == absl::StatusCode::kInvalidArgument ||
        code == absl::StatusCode::kUnimplemented) {
      return absl::OkStatus();
    }
    return absl::InternalError(absl::StrCat("undocumented refusal ", layout.status().ToString()));
  }
  if (layout->data_offset < 8 || layout->data_offset > bytes.size()) {
    return absl::InternalError(absl::StrCat("data section at ", layout->data_offset));
  }
  const uint64_t data_bytes = bytes.size() - layout->data_offset;
  for (const TensorInfo& t : layout->tensors) {
    if (t.begin > t.end || t.end > data_bytes) {
      return absl::InternalError(absl::StrCat("tensor '", t.name, "' at [", t.begin, ", ", t.end, ") of ", data_bytes));
    }
    // The byte count in 128 bits: a wrapped 64-bit product must not pass.
    unsigned __int128 span = DTypeSize(t.dtype);
    const unsigned __int128 cap = static_cast<unsigned __int128>(1) << 64;
    for (int64_t d : t.shape) {
      if (d < 0) return absl::InternalError(absl::StrCat("tensor '", t.name, "' has dimension ", d));
      span *= static_cast<uint64_t>(d);
      if (span > cap) span = cap;
    }
    if (span != t.end - t.begin) {
      return absl::InternalError(absl::StrCat("tensor '", t.name, "' ", ShapeToString(t.shape), " spans ",
                                              t.end - t.begin, " bytes"));
    }
  }
  return absl::OkStatus();
}

absl::StatusCode ModelConfigCode(absl::string_view text) {
  return ParseModelConfig(std::string(text)).status().code();
}

absl::Status CheckModelConfigProperties(absl::string_view text) {
  absl::StatusOr<ModelConfig> config = ParseModelConfig(std::string(text));
  if (!config.ok()) {
    const absl::StatusCode code = config.status().code();
    if (code == absl::StatusCode::kInvalidArgument || code == absl::StatusCode::kUnimplemented) {
      return absl::OkStatus();
    }
    return absl::InternalError(absl::StrCat("undocumented refusal ", config.status().ToString()));
  }
  const ModelConfig& c = *config;
  if (c.hidden_size < 1 || c.num_hidden_layers < 1 || c.num_attention_heads < 1 || c.num_key_value_heads < 1 ||
      c.intermediate_size < 1 || c.vocab_size < 1 || c.head_dim < 1 ||
      c.num_attention_heads % c.num_key_value_heads != 0) {
    return absl::InternalError("accepted a config with a size below 1 or heads that do not divide");
  }
  if (c.is_moe() && (c.num_experts < 1 || c.num_experts_per_tok < 1 || c.num_experts_per_tok > c.num_experts ||
                     c.moe_intermediate_size < 1 || c.decoder_sparse_step < 1)) {
    return absl::InternalError("accepted a MoE config with bad expert sizes");
  }
  if (!std::isfinite(c.rms_norm_eps) || !std::isfinite(c.rope_theta)) {
    return absl::InternalError(absl::StrCat("accepted rms_norm_eps ", c.rms_norm_eps, ", rope_theta ", c.rope_theta));
  }
  const std::string written = ModelConfigToJson(c);
  absl::StatusOr<ModelConfig> again = ParseModelConfig(written);
  if (!again.ok()) return absl::InternalError(absl::StrCat("written config refused: ", again.status().ToString()));
  if (ModelConfigToJson(*again) != written) return absl::InternalError("written config reads back different");
  return absl::OkStatus();
}

}  // namespace seam::weights::fuzz
