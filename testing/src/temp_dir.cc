#include "seam/testing/temp_dir.h"

#include <filesystem>
#include <fstream>

#include "seam/core/status.h"
#include "seam/core/temp_dir.h"

namespace seam::testing {

TempDir::TempDir(const std::string& prefix) {
  absl::StatusOr<std::string> made = MakeTempDir(prefix + "_");
  SEAM_CHECK_MSG(made.ok(), made.status().ToString());
  path_ = *made;
}

TempDir::~TempDir() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

void WriteText(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
}

}  // namespace seam::testing
