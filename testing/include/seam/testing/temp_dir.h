// Test support: a fresh directory under $TMPDIR (or /tmp), removed with its
// contents when the object goes out of scope. Aborts (SEAM_CHECK) when the
// directory cannot be made, since no test can go on without it.
#pragma once

#include <string>

namespace seam::testing {

class TempDir {
 public:
  explicit TempDir(const std::string& prefix = "seam_test");
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  // path()/name.
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// Writes `text` to `path`, replacing the file.
void WriteText(const std::string& path, const std::string& text);

}  // namespace seam::testing
