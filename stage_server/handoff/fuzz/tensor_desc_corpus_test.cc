// Replays the tensor descriptor fuzz corpus through the fuzz target's body, so
// builds without libFuzzer (gcc, CI) check every seed too, and checks that
// each seed gets the code its name states (ok_, invalid_argument_).
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "fuzz/tensor_desc_fuzz_body.h"
#include "gtest/gtest.h"
#include "seam/testing/corpus.h"

namespace seam::handoff::fuzz {
namespace {

TEST(TensorDescCorpusTest, EverySeedKeepsTheFuzzPropertiesAndGetsTheCodeItsNameStates) {
  const std::vector<std::string> names = seam::testing::CorpusSeedNames(SEAM_TENSOR_DESC_FUZZ_CORPUS);
  ASSERT_GE(names.size(), 6u) << "corpus at " << SEAM_TENSOR_DESC_FUZZ_CORPUS;
  int ok = 0, refused = 0;
  for (const std::string& name : names) {
    const std::string bytes = seam::testing::ReadCorpusSeed(SEAM_TENSOR_DESC_FUZZ_CORPUS, name);
    const absl::Status properties = CheckDescriptorProperties(bytes);
    EXPECT_TRUE(properties.ok()) << name << ": " << properties;
    if (name.rfind("ok_", 0) == 0) {
      EXPECT_EQ(DescriptorCode(bytes), absl::StatusCode::kOk) << name;
      ++ok;
    } else if (name.rfind("invalid_argument_", 0) == 0) {
      EXPECT_EQ(DescriptorCode(bytes), absl::StatusCode::kInvalidArgument) << name;
      ++refused;
    } else {
      ADD_FAILURE() << name << ": a seed is named after its code (ok_, invalid_argument_)";
    }
  }
  EXPECT_GT(ok, 0);
  EXPECT_GT(refused, 0);
}

}  // namespace
}  // namespace seam::handoff::fuzz
