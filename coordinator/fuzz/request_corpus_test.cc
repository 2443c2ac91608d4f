// Replays the request validation fuzz corpus through the fuzz target's body, so
// builds without libFuzzer (gcc, CI) check every seed too, and checks that
// each seed gets the code its name states (ok_, invalid_argument_).
#include "fuzz/request_fuzz_body.h"
#include "gtest/gtest.h"
#include "seam/testing/corpus.h"

namespace seam::coordinator::fuzz {
namespace {

TEST(RequestValidationCorpusTest, EverySeedKeepsTheFuzzPropertiesAndGetsTheCodeItsNameStates) {
  seam::testing::ReplayCorpus({SEAM_REQUEST_FUZZ_CORPUS, 6, CheckRequestProperties, GenerateCode,
                              {absl::StatusCode::kOk, absl::StatusCode::kInvalidArgument}});
}

}  // namespace
}  // namespace seam::coordinator::fuzz
