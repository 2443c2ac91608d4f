// Test support for fuzz corpora replayed by ordinary tests: the seed files
// of a corpus folder (README.md aside), in name order, their bytes, and one
// replay that checks every seed keeps the fuzz target's properties and gets
// the status code its name states ("ok_...", "invalid_argument_...": the
// code's name in lower case, then an underscore).
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace seam::testing {

std::vector<std::string> CorpusSeedNames(const std::string& dir);
std::string ReadCorpusSeed(const std::string& dir, const std::string& name);

struct CorpusReplay {
  std::string dir;
  size_t min_seeds = 1;
  std::function<absl::Status(const std::string& bytes)> properties;  // the fuzz target's invariants
  std::function<absl::StatusCode(const std::string& bytes)> code;    // what the parser answers
  std::vector<absl::StatusCode> required;  // codes at least one seed must be named after
};

// Runs the replay under gtest expectations (a failure names the seed).
void ReplayCorpus(const CorpusReplay& replay);

}  // namespace seam::testing
