// Replays the tokenizer.json fuzz corpus through the fuzz target's body, so builds
// without libFuzzer (gcc, CI) check every seed too, and checks that each seed
// gets the code its name states (ok_, invalid_argument_).
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "fuzz/tokenizer_fuzz_body.h"
#include "gtest/gtest.h"
#include "seam/testing/corpus.h"

namespace seam::tokenizer::fuzz {
namespace {

TEST(TokenizerCorpusTest, EverySeedKeepsTheFuzzPropertiesAndGetsTheCodeItsNameStates) {
  const std::vector<std::string> names = seam::testing::CorpusSeedNames(SEAM_TOKENIZER_FUZZ_CORPUS);
  ASSERT_GE(names.size(), 6u) << "corpus at " << SEAM_TOKENIZER_FUZZ_CORPUS;
  int ok = 0, refused = 0;
  for (const std::string& name : names) {
    const std::string bytes = seam::testing::ReadCorpusSeed(SEAM_TOKENIZER_FUZZ_CORPUS, name);
    const absl::Status properties = CheckTokenizerProperties(bytes);
    EXPECT_TRUE(properties.ok()) << name << ": " << properties;
    if (name.rfind("ok_", 0) == 0) {
      EXPECT_EQ(LoadCode(bytes), absl::StatusCode::kOk) << name;
      ++ok;
    } else if (name.rfind("invalid_argument_", 0) == 0) {
      EXPECT_EQ(LoadCode(bytes), absl::StatusCode::kInvalidArgument) << name;
      ++refused;
    } else {
      ADD_FAILURE() << name << ": a seed is named after its code (ok_, invalid_argument_)";
    }
  }
  EXPECT_GT(ok, 0);
  EXPECT_GT(refused, 0);
}

}  // namespace
}  // namespace seam::tokenizer::fuzz
