// Replays the tensor descriptor fuzz corpus through the fuzz target's body, so
// builds without libFuzzer (gcc, CI) check every seed too, and checks that
// each seed gets the code its name states (ok_, invalid_argument_).
#include <dirent.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "fuzz/tensor_desc_fuzz_body.h"
#include "gtest/gtest.h"

namespace seam::handoff::fuzz {
namespace {

std::vector<std::string> SeedNames() {
  std::vector<std::string> names;
  if (DIR* dir = ::opendir(SEAM_TENSOR_DESC_FUZZ_CORPUS)) {
    while (const dirent* entry = ::readdir(dir)) {
      const std::string name = entry->d_name;
      if (name != "." && name != ".." && name != "README.md") names.push_back(name);
    }
    ::closedir(dir);
  }
  return names;
}

std::string ReadSeed(const std::string& name) {
  std::ifstream in(std::string(SEAM_TENSOR_DESC_FUZZ_CORPUS) + "/" + name, std::ios::binary);
  std::stringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

TEST(TensorDescCorpusTest, EverySeedKeepsTheFuzzPropertiesAndGetsTheCodeItsNameStates) {
  const std::vector<std::string> names = SeedNames();
  ASSERT_GE(names.size(), 6u) << "corpus at " << SEAM_TENSOR_DESC_FUZZ_CORPUS;
  int ok = 0, refused = 0;
  for (const std::string& name : names) {
    const std::string bytes = ReadSeed(name);
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
