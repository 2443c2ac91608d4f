// LogRelay (log_relay.h): a polling follower; every 100 ms each file is read
// from where the last pass stopped.
#include "log_relay.h"

#include <chrono>
#include <cstdio>

namespace seam::cli {

LogRelay::LogRelay(std::vector<std::pair<std::string, std::string>> logs, std::ostream& out) : out_(out) {
  for (auto& [tag, path] : logs) logs_.push_back({std::move(tag), std::move(path)});
  thread_ = std::thread([this] { Loop(); });
}

LogRelay::~LogRelay() { Stop(); }

std::string LogRelay::Tagged(const std::string& tag, const std::string& line) {
  if (!line.empty() && line.front() == '{' && line.back() == '}') {
    return "{\"source\":\"" + tag + "\"" + (line.size() > 2 ? "," : "") + line.substr(1);
  }
  return tag + " | " + line;
}

void LogRelay::Drain() {
  std::lock_guard<std::mutex> lock(mu_);
  for (Followed& f : logs_) {
    FILE* file = std::fopen(f.path.c_str(), "r");
    if (file == nullptr) continue;
    std::string lines;
    if (std::fseek(file, f.offset, SEEK_SET) == 0) {
      char buffer[8192];
      size_t n = 0;
      while ((n = std::fread(buffer, 1, sizeof(buffer), file)) > 0) {
        f.offset += static_cast<long>(n);
        f.partial.append(buffer, n);
        for (size_t end; (end = f.partial.find('\n')) != std::string::npos;) {
          lines += Tagged(f.tag, f.partial.substr(0, end)) + "\n";
          f.partial.erase(0, end + 1);
        }
      }
    }
    std::fclose(file);
    if (!lines.empty()) out_ << lines << std::flush;
  }
}

void LogRelay::Loop() {
  while (!stop_.load()) {
    Drain();
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

void LogRelay::Stop() {
  if (stop_.exchange(true)) return;
  if (thread_.joinable()) thread_.join();
  Drain();
  std::lock_guard<std::mutex> lock(mu_);
  for (Followed& f : logs_) {
    if (!f.partial.empty()) out_ << Tagged(f.tag, f.partial) << "\n";
    f.partial.clear();
  }
  out_ << std::flush;
}

}  // namespace seam::cli
