#include "seam/testing/corpus.h"

#include <dirent.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>

#include <gtest/gtest.h>

namespace seam::testing {
namespace {

// "invalid_argument_" for kInvalidArgument.
std::string PrefixOf(absl::StatusCode code) {
  std::string name = absl::StatusCodeToString(code);
  std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
  return name + "_";
}

// The code a seed's name states; the longest matching prefix wins.
std::optional<absl::StatusCode> NamedCode(const std::string& seed) {
  std::optional<absl::StatusCode> found;
  size_t longest = 0;
  for (int c = 0; c <= static_cast<int>(absl::StatusCode::kUnauthenticated); ++c) {
    const auto code = static_cast<absl::StatusCode>(c);
    const std::string prefix = PrefixOf(code);
    if (seed.rfind(prefix, 0) == 0 && prefix.size() > longest) found = code, longest = prefix.size();
  }
  return found;
}

}  // namespace

std::vector<std::string> CorpusSeedNames(const std::string& dir) {
  std::vector<std::string> names;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (const dirent* entry = ::readdir(d)) {
      const std::string name = entry->d_name;
      if (name != "." && name != ".." && name != "README.md") names.push_back(name);
    }
    ::closedir(d);
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::string ReadCorpusSeed(const std::string& dir, const std::string& name) {
  std::ifstream in(dir + "/" + name, std::ios::binary);
  std::stringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

void ReplayCorpus(const CorpusReplay& r) {
  const std::vector<std::string> names = CorpusSeedNames(r.dir);
  ASSERT_GE(names.size(), r.min_seeds) << "corpus at " << r.dir;
  std::map<absl::StatusCode, int> seen;
  for (const std::string& name : names) {
    const std::string bytes = ReadCorpusSeed(r.dir, name);
    const absl::Status kept = r.properties(bytes);
    EXPECT_TRUE(kept.ok()) << name << ": " << kept;
    const std::optional<absl::StatusCode> want = NamedCode(name);
    if (!want.has_value()) {
      ADD_FAILURE() << name << ": a seed is named after its code (ok_, invalid_argument_, ...)";
      continue;
    }
    EXPECT_EQ(r.code(bytes), *want) << name;
    ++seen[*want];
  }
  for (absl::StatusCode code : r.required) {
    EXPECT_GT(seen[code], 0) << "no seed named " << PrefixOf(code) << "* in " << r.dir;
  }
}

}  // namespace seam::testing
