// Replays the handoff header fuzz corpus through the fuzz target's body, so
// builds without libFuzzer (gcc, CI) check every seed too, and checks that
// each seed gets the code its name states.
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "fuzz/handoff_header_fuzz_body.h"
#include "gtest/gtest.h"
#include "seam/testing/corpus.h"

namespace seam::handoff::fuzz {
namespace {

// The code a seed's name promises; the longest matching prefix wins.
const std::map<std::string, absl::StatusCode>& NamedCodes() {
  static const auto* codes = new std::map<std::string, absl::StatusCode>{
      {"ok_", absl::StatusCode::kOk},
      {"out_of_range_", absl::StatusCode::kOutOfRange},
      {"permission_denied_", absl::StatusCode::kPermissionDenied},
      {"invalid_argument_", absl::StatusCode::kInvalidArgument}};
  return *codes;
}

TEST(HandoffHeaderCorpusTest, EverySeedKeepsTheFuzzPropertiesAndGetsTheCodeItsNameStates) {
  const std::vector<std::string> names = seam::testing::CorpusSeedNames(SEAM_HANDOFF_FUZZ_CORPUS);
  ASSERT_GE(names.size(), 10u) << "corpus at " << SEAM_HANDOFF_FUZZ_CORPUS;
  std::map<absl::StatusCode, int> seen;
  for (const std::string& name : names) {
    const std::string bytes = seam::testing::ReadCorpusSeed(SEAM_HANDOFF_FUZZ_CORPUS, name);
    const absl::Status properties = CheckHeaderProperties(bytes);
    EXPECT_TRUE(properties.ok()) << name << ": " << properties;
    for (const auto& [prefix, code] : NamedCodes()) {
      if (name.rfind(prefix, 0) != 0) continue;
      const absl::Status got = CheckHeaderBytes(bytes, kFuzzKey, kFuzzLimits).status();
      EXPECT_EQ(got.code(), code) << name << ": " << got;
      ++seen[code];
    }
  }
  for (const auto& [prefix, code] : NamedCodes()) EXPECT_GT(seen[code], 0) << "no seed named " << prefix << "*";
}

}  // namespace
}  // namespace seam::handoff::fuzz
