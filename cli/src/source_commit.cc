// source_commit.h: asks git.
#include "source_commit.h"

#include <cstdio>

namespace seam::cli {

std::string SourceCommit() {
  std::string commit;
  if (FILE* pipe = popen("git rev-parse --short HEAD 2>/dev/null", "r")) {
    char buffer[64];
    while (fgets(buffer, sizeof(buffer), pipe) != nullptr) commit += buffer;
    pclose(pipe);
  }
  while (!commit.empty() && (commit.back() == '\n' || commit.back() == ' ')) commit.pop_back();
  return commit.empty() ? "unknown" : commit;
}

}  // namespace seam::cli
