// Test support for fuzz corpora replayed by ordinary tests: the seed files
// of a corpus folder (README.md aside), in name order, and their bytes.
#pragma once

#include <string>
#include <vector>

namespace seam::testing {

std::vector<std::string> CorpusSeedNames(const std::string& dir);
std::string ReadCorpusSeed(const std::string& dir, const std::string& name);

}  // namespace seam::testing
