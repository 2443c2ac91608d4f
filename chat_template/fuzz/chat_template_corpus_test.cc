// Replays the chat template fuzz corpus through the fuzz target's body, so builds
// without libFuzzer (gcc, CI) check every seed too, and checks that each seed
// gets the code its name states (ok_, invalid_argument_).
#include "fuzz/chat_template_fuzz_body.h"
#include "gtest/gtest.h"
#include "seam/testing/corpus.h"

namespace seam::chat_template::fuzz {
namespace {

TEST(ChatTemplateCorpusTest, EverySeedKeepsTheFuzzPropertiesAndGetsTheCodeItsNameStates) {
  seam::testing::ReplayCorpus({SEAM_CHAT_TEMPLATE_FUZZ_CORPUS, 6, CheckTemplateProperties, RenderCode,
                              {absl::StatusCode::kOk, absl::StatusCode::kInvalidArgument}});
}

}  // namespace
}  // namespace seam::chat_template::fuzz
