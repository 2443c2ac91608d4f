// LogRelay: the logs of a local pipeline's processes, followed as they are
// written and copied line by line into one stream (seam serve's stderr),
// each line tagged with its process: "stage0 | <line>" for text lines,
// a leading "source" member ({"source":"stage0",...}) for JSON lines, so the
// stream stays one JSON object per line. Owns one thread; the files stay.
#pragma once

#include <atomic>
#include <mutex>
#include <ostream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace seam::cli {

class LogRelay {
 public:
  // Follows each {tag, path} (a file that does not exist yet is waited for)
  // and writes whole lines to `out` (which must outlive the relay).
  LogRelay(std::vector<std::pair<std::string, std::string>> logs, std::ostream& out);
  ~LogRelay();  // Stop()
  LogRelay(const LogRelay&) = delete;
  LogRelay& operator=(const LogRelay&) = delete;

  // Copies what is left and stops following. Idempotent.
  void Stop();

  // `line` as the relay writes it for `tag` (without the newline).
  static std::string Tagged(const std::string& tag, const std::string& line);

 private:
  struct Followed {
    std::string tag, path;
    long offset = 0;      // bytes of the file copied or held in `partial`
    std::string partial;  // the start of a line not yet ended
  };
  void Drain();  // one pass over every file
  void Loop();
  std::vector<Followed> logs_;
  std::ostream& out_;
  std::mutex mu_;  // Drain: the thread and Stop
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace seam::cli
