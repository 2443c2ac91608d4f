// Replays the OpenAI request fuzz corpus through the fuzz target's body, so
// builds without libFuzzer (gcc, CI) check every seed too, and checks that
// each seed gets the code its name states.
#include "fuzz/openai_request_fuzz_body.h"
#include "gtest/gtest.h"
#include "seam/testing/corpus.h"

namespace seam::coordinator::fuzz {
namespace {

TEST(OpenAiRequestCorpusTest, EverySeedKeepsTheFuzzPropertiesAndGetsTheCodeItsNameStates) {
  seam::testing::ReplayCorpus({SEAM_OPENAI_REQUEST_FUZZ_CORPUS, 8, CheckOpenAiRequestProperties, OpenAiRequestCode,
                              {absl::StatusCode::kOk, absl::StatusCode::kInvalidArgument}});
}

}  // namespace
}  // namespace seam::coordinator::fuzz
