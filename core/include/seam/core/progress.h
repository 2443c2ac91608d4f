// Progress of one long step a person may be waiting on (loading weights,
// writing a checkpoint, allocating the KV cache). On a terminal it is one
// line on stderr redrawn in place, at most ten times a second; anywhere else
// (a pipe, a file, a container log) it is plain log lines: one when the step
// starts, one each time another tenth of the work is done (at most one a
// second, so a quick step writes only its first and last), one at the end.
// Libraries create a Progress wherever work is long; the process decides in
// main() whether anything shows (SetProgressMode, default off, so tests and
// library users stay quiet). A Progress is thread-safe: the ranks of a group
// may Advance one Progress together.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>

namespace seam {

enum class ProgressMode {
  kOff,       // nothing is shown
  kAuto,      // kTerminal when stderr is a terminal (and TERM is not "dumb"), else kPlain
  kTerminal,  // one line redrawn in place
  kPlain,     // plain lines through the process log (SEAM_LOG_INFO)
};

// The process-wide mode that new Progress objects take. SEAM_PROGRESS
// (off|auto|terminal|plain), when set, wins over `mode`.
void SetProgressMode(ProgressMode mode);
ProgressMode CurrentProgressMode();

enum class ProgressUnit { kItems, kBytes };

struct ProgressOptions {
  // kAuto here means "the process-wide mode" (SetProgressMode), resolved
  // against stderr when that is kAuto too.
  ProgressMode mode = ProgressMode::kAuto;
  // Where kTerminal draws (a file descriptor; stderr by default).
  int terminal_fd = 2;
  // Receives each kPlain line; empty: SEAM_LOG_INFO.
  std::function<void(const std::string&)> plain_line;
  // Time source (tests pass a fake one); empty: the steady clock.
  std::function<std::chrono::steady_clock::time_point()> now;
};

// "512 B", "12.0 MiB", "1.50 GiB".
std::string FormatBytes(int64_t bytes);

class Progress {
 public:
  // `what` names the step ("loading weights of layers 0..27"); `total` is
  // the work in `unit` (0 and below: shown as counts without a percentage).
  Progress(std::string what, int64_t total, ProgressUnit unit, ProgressOptions options = {});
  ~Progress();  // Finish()
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  // `amount` more is done; `current` names what is being worked on now
  // ("layer 5, model-00002-of-00004.safetensors"), shown until replaced.
  void Advance(int64_t amount, const std::string& current = "");
  // The last line ("<what>: done, <total> in <seconds> s"); later calls and
  // Advance do nothing.
  void Finish();
  // As Finish, but the line says the step failed: "<what>: stopped at ...".
  void Fail();

  // Which of kOff, kTerminal, kPlain this Progress draws with.
  ProgressMode mode() const { return mode_; }

 private:
  std::string Amount(int64_t value) const;
  std::string Line() const;  // "<what>: <bar> <pct>% <done>/<total> <current>"
  void Emit(const std::string& line);
  void End(bool ok);

  const std::string what_;
  const int64_t total_;
  const ProgressUnit unit_;
  ProgressOptions options_;
  ProgressMode mode_;
  std::chrono::steady_clock::time_point start_, last_draw_;  // last_draw_: the last line or redraw

  std::mutex mu_;
  int64_t done_ = 0;
  std::string current_;
  int tenths_shown_ = 0;  // kPlain: the last tenth of the work a line was written for
  bool ended_ = false;
};

}  // namespace seam
