// The timeline of a chaos scenario's recovery; see chaos_timeline.h.
#include "chaos_timeline.h"

#include <dirent.h>

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/str_format.h"

namespace seam::cli::chaos {
namespace {

constexpr double kDayMs = 24.0 * 3600 * 1000;
// At most this many log lines in a timeline (a stage may log one line per
// microbatch that ran out of its budget).
constexpr size_t kMaxLogLines = 60;

double LocalMsOfDay(std::chrono::system_clock::time_point t) {
  const auto since = t.time_since_epoch();
  const std::time_t seconds = std::chrono::duration_cast<std::chrono::seconds>(since).count();
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(since).count() % 1000;
  std::tm local{};
  localtime_r(&seconds, &local);
  return ((local.tm_hour * 60.0 + local.tm_min) * 60.0 + local.tm_sec) * 1000.0 + static_cast<double>(ms);
}

// "[HH:MM:SS.mmm] ..." (the text log format): milliseconds of the day, or -1.
double LineMsOfDay(const std::string& line) {
  int h = 0, m = 0, s = 0, ms = 0;
  if (std::sscanf(line.c_str(), "[%2d:%2d:%2d.%3d]", &h, &m, &s, &ms) != 4) return -1;
  return ((h * 60.0 + m) * 60.0 + s) * 1000.0 + ms;
}

}  // namespace

bool TellsRecovery(const std::string& line) {
  static const char* const kTelling[] = {
      // coordinator: the failure, each attempt and its phases, the return
      "pipeline down", "pipeline still down", "every stage answered GetStatus", "pipeline back up",
      "waiting for stage",
      // stages: start, Configure of a new epoch, the reload, waits cut or spent, READY
      "stage server listening", "configure for epoch", "reload for epoch", "loading layers", "configure failed",
      "stage ready", "the wait was cut short", "ran out of its budget"};
  return std::any_of(std::begin(kTelling), std::end(kTelling),
                     [&](const char* t) { return absl::StrContains(line, t); });
}

Timeline::Timeline() : fault_(Clock::now()), fault_ms_of_day_(LocalMsOfDay(std::chrono::system_clock::now())) {
  marks_.emplace_back(0.0, "test: the fault");
}

void Timeline::Mark(const std::string& what) {
  marks_.emplace_back(std::chrono::duration<double>(Clock::now() - fault_).count(), "test: " + what);
}

std::string Timeline::Render(const std::string& log_dir) const {
  std::vector<std::pair<double, std::string>> rows = marks_;
  std::vector<std::pair<double, std::string>> lines;
  if (DIR* dir = opendir(log_dir.c_str())) {
    while (const dirent* entry = readdir(dir)) {
      const std::string name = entry->d_name;
      if (!absl::EndsWith(name, ".log")) continue;
      std::ifstream file(log_dir + "/" + name);
      for (std::string line; std::getline(file, line);) {
        const double ms = LineMsOfDay(line);
        if (ms < 0 || !TellsRecovery(line)) continue;
        double after = (ms - fault_ms_of_day_) / 1000.0;
        if (after < -kDayMs / 2000.0) after += kDayMs / 1000.0;  // past midnight
        if (after < -0.001) continue;                             // before the fault (log times are whole ms)
        lines.emplace_back(after, name.substr(0, name.size() - 4) + ": " + line.substr(line.find(']') + 2));
      }
    }
    closedir(dir);
  }
  std::sort(lines.begin(), lines.end());
  const size_t dropped = lines.size() > kMaxLogLines ? lines.size() - kMaxLogLines : 0;
  if (dropped > 0) lines.resize(kMaxLogLines);
  rows.insert(rows.end(), lines.begin(), lines.end());
  std::stable_sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::string out;
  for (const auto& [after, text] : rows) absl::StrAppendFormat(&out, "  %+8.3f s  %s\n", after, text);
  if (dropped > 0) absl::StrAppendFormat(&out, "  (%d later log lines left out)\n", dropped);
  return out;
}

}  // namespace seam::cli::chaos
