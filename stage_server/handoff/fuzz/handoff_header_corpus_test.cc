// Replays the handoff header fuzz corpus through the fuzz target's body, so
// builds without libFuzzer (gcc, CI) check every seed too, and checks that
// each seed gets the code its name states.
#include <string>

#include "fuzz/handoff_header_fuzz_body.h"
#include "gtest/gtest.h"
#include "seam/testing/corpus.h"

namespace seam::handoff::fuzz {
namespace {

TEST(HandoffHeaderCorpusTest, EverySeedKeepsTheFuzzPropertiesAndGetsTheCodeItsNameStates) {
  seam::testing::ReplayCorpus(
      {SEAM_HANDOFF_FUZZ_CORPUS, 10, CheckHeaderProperties,
       [](const std::string& bytes) { return CheckHeaderBytes(bytes, kFuzzKey, kFuzzLimits).status().code(); },
       {absl::StatusCode::kOk, absl::StatusCode::kOutOfRange, absl::StatusCode::kPermissionDenied,
        absl::StatusCode::kInvalidArgument}});
}

}  // namespace
}  // namespace seam::handoff::fuzz
