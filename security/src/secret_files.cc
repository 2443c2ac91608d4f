// File reading and 0600 writing for certificates, keys and tokens.
#include "seam/security/secret_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace seam::security {

absl::StatusOr<std::string> ReadFileForFlag(const std::string& path, const std::string& what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::ErrnoToStatus(errno, absl::StrCat(what, ": cannot read ", path));
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

absl::StatusOr<std::string> ReadTokenFile(const std::string& path, const std::string& what) {
  absl::StatusOr<std::string> text = ReadFileForFlag(path, what);
  if (!text.ok()) return text.status();
  const std::string token(absl::StripAsciiWhitespace(*text));
  if (token.empty()) return absl::InvalidArgumentError(absl::StrCat(what, ": ", path, " holds no token"));
  for (const char c : token) {
    if (c <= ' ' || c == 0x7f) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": the token in ", path, " holds a space or control character"));
    }
  }
  return token;
}

absl::Status WritePrivateFile(const std::string& path, const std::string& content) {
  ::unlink(path.c_str());
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return absl::ErrnoToStatus(errno, absl::StrCat("cannot create ", path));
  size_t written = 0;
  while (written < content.size()) {
    const ssize_t n = ::write(fd, content.data() + written, content.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int e = errno;
      ::close(fd);
      return absl::ErrnoToStatus(e, absl::StrCat("cannot write ", path));
    }
    written += static_cast<size_t>(n);
  }
  if (::close(fd) != 0) return absl::ErrnoToStatus(errno, absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

}  // namespace seam::security
