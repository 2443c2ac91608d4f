// Replays the safetensors and config.json fuzz corpora through the fuzz
// targets' bodies, so builds without libFuzzer (gcc, CI) check every seed
// too, and checks that each seed gets the code its name states.
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "fuzz/weights_fuzz_body.h"
#include "gtest/gtest.h"
#include "seam/testing/corpus.h"

namespace seam::weights::fuzz {
namespace {

// The code a seed's name promises.
const std::map<std::string, absl::StatusCode>& NamedCodes() {
  static const auto* codes = new std::map<std::string, absl::StatusCode>{
      {"ok_", absl::StatusCode::kOk},
      {"data_loss_", absl::StatusCode::kDataLoss},
      {"invalid_argument_", absl::StatusCode::kInvalidArgument},
      {"unimplemented_", absl::StatusCode::kUnimplemented}};
  return *codes;
}

template <typename Properties, typename Code>
void Replay(const std::string& dir, Properties properties, Code code, size_t min_seeds) {
  const std::vector<std::string> names = seam::testing::CorpusSeedNames(dir);
  ASSERT_GE(names.size(), min_seeds) << "corpus at " << dir;
  std::map<absl::StatusCode, int> seen;
  for (const std::string& name : names) {
    const std::string bytes = seam::testing::ReadCorpusSeed(dir, name);
    const absl::Status kept = properties(bytes);
    EXPECT_TRUE(kept.ok()) << name << ": " << kept;
    bool named = false;
    for (const auto& [prefix, want] : NamedCodes()) {
      if (name.rfind(prefix, 0) != 0) continue;
      EXPECT_EQ(code(bytes), want) << name;
      ++seen[want];
      named = true;
    }
    EXPECT_TRUE(named) << name << ": a seed is named after its code";
  }
  EXPECT_GT(seen[absl::StatusCode::kOk], 0) << "no ok_ seed in " << dir;
}

TEST(SafetensorsCorpusTest, EverySeedKeepsTheFuzzPropertiesAndGetsTheCodeItsNameStates) {
  Replay(SEAM_WEIGHTS_FUZZ_DIR "/safetensors_corpus", CheckSafetensorsProperties, SafetensorsCode, 8);
}

TEST(ModelConfigCorpusTest, EverySeedKeepsTheFuzzPropertiesAndGetsTheCodeItsNameStates) {
  Replay(SEAM_WEIGHTS_FUZZ_DIR "/config_corpus", CheckModelConfigProperties, ModelConfigCode, 8);
}

}  // namespace
}  // namespace seam::weights::fuzz
