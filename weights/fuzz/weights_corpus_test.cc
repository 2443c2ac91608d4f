// Replays the safetensors and config.json fuzz corpora through the fuzz
// targets' bodies, so builds without libFuzzer (gcc, CI) check every seed
// too, and checks that each seed gets the code its name states.
#include <string>

#include "fuzz/weights_fuzz_body.h"
#include "gtest/gtest.h"
#include "seam/testing/corpus.h"

namespace seam::weights::fuzz {
namespace {

TEST(SafetensorsCorpusTest, EverySeedKeepsTheFuzzPropertiesAndGetsTheCodeItsNameStates) {
  seam::testing::ReplayCorpus({SEAM_WEIGHTS_FUZZ_DIR "/safetensors_corpus", 8, CheckSafetensorsProperties,
                               SafetensorsCode, {absl::StatusCode::kOk}});
}

TEST(ModelConfigCorpusTest, EverySeedKeepsTheFuzzPropertiesAndGetsTheCodeItsNameStates) {
  seam::testing::ReplayCorpus({SEAM_WEIGHTS_FUZZ_DIR "/config_corpus", 8, CheckModelConfigProperties,
                               ModelConfigCode, {absl::StatusCode::kOk}});
}

}  // namespace
}  // namespace seam::weights::fuzz
