// Test support: runs a shell command as a user would and keeps its exit
// code and everything it printed (stdout and stderr together).
#pragma once

#include <string>

namespace seam::testing {

struct CommandRun {
  int exit_code = -1;  // -1 when it could not start or did not exit normally
  std::string output;
};

CommandRun RunCommand(const std::string& command);

}  // namespace seam::testing
