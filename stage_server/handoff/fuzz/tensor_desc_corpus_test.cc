// Replays the tensor descriptor fuzz corpus through the fuzz target's body, so
// builds without libFuzzer (gcc, CI) check every seed too, and checks that
// each seed gets the code its name states (ok_, invalid_argument_).
#include "fuzz/tensor_desc_fuzz_body.h"
#include "gtest/gtest.h"
#include "seam/testing/corpus.h"

namespace seam::handoff::fuzz {
namespace {

TEST(TensorDescCorpusTest, EverySeedKeepsTheFuzzPropertiesAndGetsTheCodeItsNameStates) {
  seam::testing::ReplayCorpus({SEAM_TENSOR_DESC_FUZZ_CORPUS, 6, CheckDescriptorProperties, DescriptorCode,
                              {absl::StatusCode::kOk, absl::StatusCode::kInvalidArgument}});
}

}  // namespace
}  // namespace seam::handoff::fuzz
