// FileStore: keys are files in one directory, written atomically (temp file,
// then link(2), which fails if the key exists) and polled by Get.
// PrefixStore: a view of another store under "<prefix>/".
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "seam/comm/store.h"

namespace seam::comm {
namespace {

// Keys may hold any byte; file names keep [A-Za-z0-9._-] and escape the rest as %XX.
std::string FileNameOf(const std::string& key) {
  std::string name;
  for (unsigned char c : key) {
    if (std::isalnum(c) || c == '.' || c == '_' || c == '-') {
      name.push_back(static_cast<char>(c));
    } else {
      name += absl::StrFormat("%%%02X", c);
    }
  }
  return name.empty() ? "%" : name;
}

absl::Status ErrnoStatus(const std::string& what) {
  const int err = errno;
  return absl::UnavailableError(absl::StrCat(what, ": ", std::strerror(err)));
}

class FileStore final : public Store {
 public:
  explicit FileStore(std::string directory) : directory_(std::move(directory)) {}

  absl::Status Set(const std::string& key, const std::vector<char>& value) override {
    const std::string path = PathOf(key);
    static std::atomic<uint64_t> counter{0};
    const std::string tmp = absl::StrCat(directory_, "/.tmp.", ::getpid(), ".", counter.fetch_add(1));
    {
      std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
      out.write(value.data(), static_cast<std::streamsize>(value.size()));
      out.flush();
      if (!out) return absl::UnavailableError(absl::StrCat("store key '", key, "': cannot write ", tmp));
    }
    const int rc = ::link(tmp.c_str(), path.c_str());
    const int link_errno = errno;
    ::unlink(tmp.c_str());
    if (rc != 0) {
      if (link_errno == EEXIST) {
        return absl::AlreadyExistsError(absl::StrCat("store key '", key, "' already exists in ", directory_,
                                                     "; keys are written once, use a fresh directory or prefix"));
      }
      errno = link_errno;
      return ErrnoStatus(absl::StrCat("store key '", key, "': link to ", path));
    }
    return absl::OkStatus();
  }

  absl::StatusOr<std::vector<char>> Get(const std::string& key, absl::Duration timeout) override {
    const std::string path = PathOf(key);
    const absl::Time deadline = absl::Now() + timeout;
    absl::Duration pause = absl::Milliseconds(1);
    while (true) {
      std::ifstream in(path, std::ios::binary);
      if (in) {
        return std::vector<char>(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
      }
      const absl::Time now = absl::Now();
      if (now >= deadline) {
        return absl::DeadlineExceededError(absl::StrCat("store key '", key, "' did not appear within ",
                                                        absl::FormatDuration(timeout)));
      }
      absl::SleepFor(std::min(pause, deadline - now));
      pause = std::min(pause * 2, absl::Milliseconds(10));
    }
  }

 private:
  std::string PathOf(const std::string& key) const { return absl::StrCat(directory_, "/", FileNameOf(key)); }
  std::string directory_;
};

class PrefixStore final : public Store {
 public:
  PrefixStore(std::string prefix, std::shared_ptr<Store> inner) : prefix_(std::move(prefix)), inner_(std::move(inner)) {}
  absl::Status Set(const std::string& key, const std::vector<char>& value) override {
    return inner_->Set(Full(key), value);
  }
  absl::StatusOr<std::vector<char>> Get(const std::string& key, absl::Duration timeout) override {
    return inner_->Get(Full(key), timeout);
  }

 private:
  std::string Full(const std::string& key) const { return absl::StrCat(prefix_, "/", key); }
  std::string prefix_;
  std::shared_ptr<Store> inner_;
};

}  // namespace

absl::StatusOr<std::shared_ptr<Store>> MakeFileStore(const std::string& directory) {
  std::error_code ec;
  std::filesystem::create_directories(directory, ec);
  if (ec || !std::filesystem::is_directory(directory)) {
    return absl::InvalidArgumentError(absl::StrCat("file store directory '", directory, "' cannot be created: ",
                                                   ec ? ec.message() : "not a directory"));
  }
  return std::shared_ptr<Store>(std::make_shared<FileStore>(directory));
}

std::shared_ptr<Store> MakePrefixStore(std::string prefix, std::shared_ptr<Store> inner) {
  return std::make_shared<PrefixStore>(std::move(prefix), std::move(inner));
}

}  // namespace seam::comm
