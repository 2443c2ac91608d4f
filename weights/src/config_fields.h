// The typed readers of config.json fields that every architecture's parser
// shares, and the per-architecture parsers beside ParseModelConfig. Private
// to the weights library. Every reader leaves `out` at its default when the
// key is absent or null, and answers INVALID_ARGUMENT naming the field for a
// value of the wrong type.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "seam/weights/model_config.h"

namespace seam::weights::internal {

using Json = nlohmann::json;

// Fields every PretrainedConfig may carry that do not change what inference
// computes (names, token ids, output switches, generation defaults).
bool IsInferenceNeutralField(const std::string& key);
// INVALID_ARGUMENT "config.json: field '<key>' <what>".
absl::Status FieldError(const std::string& key, const std::string& what);
// `required`: an absent or null key is an error.
absl::Status ReadInt(const Json& j, const std::string& key, int64_t* out, bool required);
// A finite float within float range (every spelling FloatValue reads).
absl::Status ReadFloat(const Json& j, const std::string& key, float* out);
absl::Status ReadBool(const Json& j, const std::string& key, bool* out);
// An integer or a list of integers (the first counts).
absl::Status ReadTokenId(const Json& j, const std::string& key, int64_t* out);
// "torch_dtype" (transformers 4.x) or "dtype" (5.x); float32 when absent.
absl::StatusOr<DType> ReadTorchDType(const Json& j);

// The shortest decimal that reads back as `f` ("1e-06", not 9.99e-07).
double ShortestDecimal(float f);
// A token id, or null when negative.
Json TokenIdJson(int64_t id);
// "float32", "bfloat16" or "float16".
const char* TorchDTypeName(DType dtype);

// How writers spell floats JSON has no number for (src/config_floats.cc).
// Python's json writes infinite floats as the bare tokens Infinity and
// -Infinity (and NaN), which JSON does not have: this returns the text with
// each such token outside a string turned into the string "Infinity",
// "-Infinity" or "NaN", for the readers of the fields that allow them.
std::string QuoteNonFiniteNumbers(const std::string& text);
// transformers 5 writes a non-finite float as {"__float__": "Infinity"}:
// every such object in `j` becomes the string "Infinity", "-Infinity" or
// "NaN" (a number inside becomes that number), the spelling above.
void UnwrapFloatObjects(Json& j);
// A number, or one of those three strings; INVALID_ARGUMENT naming `key`
// ("must hold numbers") otherwise.
absl::StatusOr<double> FloatValue(const std::string& key, const Json& v);

// The fields of a NemotronHForCausalLM config (model_type nemotron_h), after
// its architecture was read into c->architecture.
absl::Status ParseNemotronH(const Json& j, ModelConfig* c);
// config.json text of a nemotron_h config (both transformers 4.x and 5.x read it).
std::string NemotronHConfigToJson(const ModelConfig& c);
// ValidateParallel's checks for nemotron_h.
absl::Status ValidateNemotronHParallel(const ModelConfig& c, int tp, int attn_tp);

// The fields of a LongcatFlashForCausalLM config (model_type longcat_flash;
// longcat_flash_config.cc), its config.json text as transformers 5 writes
// it, and ValidateParallel's checks for it.
absl::Status ParseLongcatFlash(const Json& j, ModelConfig* c);
std::string LongcatFlashConfigToJson(const ModelConfig& c);
absl::Status ValidateLongcatFlashParallel(const ModelConfig& c, int tp, int attn_tp);

}  // namespace seam::weights::internal
