// Progress: a redrawn terminal line or plain log lines for one long step.
#include "seam/core/progress.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "seam/core/logging.h"

namespace seam {
namespace {

std::atomic<ProgressMode> g_mode{ProgressMode::kOff};

bool ParseMode(const char* text, ProgressMode* mode) {
  if (text == nullptr) return false;
  const std::string t(text);
  if (t == "off") *mode = ProgressMode::kOff;
  else if (t == "auto") *mode = ProgressMode::kAuto;
  else if (t == "terminal") *mode = ProgressMode::kTerminal;
  else if (t == "plain") *mode = ProgressMode::kPlain;
  else return false;
  return true;
}

// kAuto resolved against stderr: a terminal that can take "\r" redraws.
ProgressMode Resolve(ProgressMode mode, int fd) {
  if (mode != ProgressMode::kAuto) return mode;
  const char* term = std::getenv("TERM");
  const bool dumb = term != nullptr && std::strcmp(term, "dumb") == 0;
  return ::isatty(fd) == 1 && !dumb ? ProgressMode::kTerminal : ProgressMode::kPlain;
}

constexpr int kBarWidth = 24;
constexpr auto kRedrawEvery = std::chrono::milliseconds(100);
constexpr auto kPlainLineEvery = std::chrono::seconds(1);

}  // namespace

void SetProgressMode(ProgressMode mode) {
  ProgressMode from_env;
  g_mode.store(ParseMode(std::getenv("SEAM_PROGRESS"), &from_env) ? from_env : mode);
}

ProgressMode CurrentProgressMode() { return g_mode.load(); }

std::string FormatBytes(int64_t bytes) {
  if (bytes < 1024) return absl::StrCat(bytes, " B");
  const char* units[] = {"KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes) / 1024.0;
  int u = 0;
  while (value >= 1024.0 && u < 3) {
    value /= 1024.0;
    ++u;
  }
  if (value < 10) return absl::StrFormat("%.2f %s", value, units[u]);
  return absl::StrFormat("%.1f %s", value, units[u]);
}

Progress::Progress(std::string what, int64_t total, ProgressUnit unit, ProgressOptions options)
    : what_(std::move(what)), total_(total), unit_(unit), options_(std::move(options)) {
  if (!options_.now) options_.now = [] { return std::chrono::steady_clock::now(); };
  const ProgressMode wanted = options_.mode == ProgressMode::kAuto ? CurrentProgressMode() : options_.mode;
  mode_ = Resolve(wanted, options_.terminal_fd);
  start_ = options_.now();
  last_draw_ = start_;
  if (mode_ == ProgressMode::kPlain) {
    Emit(total_ > 0 ? absl::StrCat(what_, ": started, ", Amount(total_)) : absl::StrCat(what_, ": started"));
  } else if (mode_ == ProgressMode::kTerminal) {
    Emit(Line());
  }
}

Progress::~Progress() { Finish(); }

std::string Progress::Amount(int64_t value) const {
  return unit_ == ProgressUnit::kBytes ? FormatBytes(value) : absl::StrCat(value);
}

std::string Progress::Line() const {
  std::string line = absl::StrCat(what_, ": ");
  if (total_ > 0) {
    const int64_t shown = std::min(done_, total_);
    const int filled = static_cast<int>(shown * kBarWidth / total_);
    absl::StrAppend(&line, "[", std::string(filled, '#'), std::string(kBarWidth - filled, '.'), "] ",
                    shown * 100 / total_, "% (", Amount(done_), " of ", Amount(total_), ")");
  } else {
    absl::StrAppend(&line, Amount(done_));
  }
  if (!current_.empty()) absl::StrAppend(&line, " ", current_);
  return line;
}

void Progress::Emit(const std::string& line) {
  if (mode_ == ProgressMode::kPlain) {
    if (options_.plain_line) {
      options_.plain_line(line);
    } else {
      SEAM_LOG_INFO("{}", line);
    }
  } else if (mode_ == ProgressMode::kTerminal) {
    // Carriage return, erase to the end of the line, then the line.
    const std::string out = absl::StrCat("\r\x1b[K", line);
    [[maybe_unused]] ssize_t n = ::write(options_.terminal_fd, out.data(), out.size());
  }
}

void Progress::Advance(int64_t amount, const std::string& current) {
  std::lock_guard<std::mutex> lock(mu_);
  if (ended_ || mode_ == ProgressMode::kOff) return;
  done_ += amount;
  if (!current.empty()) current_ = current;
  if (mode_ == ProgressMode::kTerminal) {
    const auto now = options_.now();
    if (now - last_draw_ >= kRedrawEvery || (total_ > 0 && done_ >= total_)) {
      last_draw_ = now;
      Emit(Line());
    }
    return;
  }
  // Plain: a line for each tenth newly passed, below the whole (End writes that one).
  if (total_ <= 0) return;
  const int tenths = static_cast<int>(std::min<int64_t>(done_, total_) * 10 / total_);
  if (tenths > tenths_shown_ && tenths < 10) {
    const auto now = options_.now();
    if (now - last_draw_ < kPlainLineEvery) return;
    last_draw_ = now;
    tenths_shown_ = tenths;
    Emit(Line());
  }
}

void Progress::End(bool ok) {
  std::lock_guard<std::mutex> lock(mu_);
  if (ended_ || mode_ == ProgressMode::kOff) return;
  ended_ = true;
  const double seconds = std::chrono::duration<double>(options_.now() - start_).count();
  std::string line = ok ? absl::StrCat(what_, ": done, ", Amount(done_))
                        : absl::StrCat(what_, ": stopped at ", Amount(done_));
  if (total_ > 0 && !ok) absl::StrAppend(&line, " of ", Amount(total_));
  absl::StrAppend(&line, absl::StrFormat(" in %.1f s", seconds));
  Emit(line);
  if (mode_ == ProgressMode::kTerminal) {
    [[maybe_unused]] ssize_t n = ::write(options_.terminal_fd, "\n", 1);
  }
}

void Progress::Finish() { End(true); }
void Progress::Fail() { End(false); }

}  // namespace seam
