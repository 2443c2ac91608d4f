// Replays the tokenizer.json fuzz corpus through the fuzz target's body, so builds
// without libFuzzer (gcc, CI) check every seed too, and checks that each seed
// gets the code its name states (ok_, invalid_argument_).
#include "fuzz/tokenizer_fuzz_body.h"
#include "gtest/gtest.h"
#include "seam/testing/corpus.h"

namespace seam::tokenizer::fuzz {
namespace {

TEST(TokenizerCorpusTest, EverySeedKeepsTheFuzzPropertiesAndGetsTheCodeItsNameStates) {
  seam::testing::ReplayCorpus({SEAM_TOKENIZER_FUZZ_CORPUS, 6, CheckTokenizerProperties, LoadCode,
                              {absl::StatusCode::kOk, absl::StatusCode::kInvalidArgument}});
}

}  // namespace
}  // namespace seam::tokenizer::fuzz
