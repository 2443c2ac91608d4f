// Where a chaos scenario's recovery spent its time: the test's own marks
// (the fault, the restart, service again) beside the lines of the processes'
// logs that tell the failure and the recovery (the coordinator's attempts
// and their phases, each stage's Configure, reload and READY), every one as
// seconds after the fault. Printed when a recovery is slow, so that a slow
// run can be read from the test's output alone.
#pragma once

#include <chrono>
#include <string>
#include <utility>
#include <vector>

namespace seam::cli::chaos {

class Timeline {
 public:
  using Clock = std::chrono::steady_clock;
  // The fault happens now.
  Timeline();
  // A mark of the test, now.
  void Mark(const std::string& what);
  // The marks and the telling lines of every *.log file in `log_dir` from
  // the fault on, in time order, one per line ("+1.234 s  name: line"). Log
  // lines carry local wall-clock times to the millisecond; marks are placed
  // on the same clock.
  std::string Render(const std::string& log_dir) const;

 private:
  Clock::time_point fault_;
  double fault_ms_of_day_ = 0;  // local wall clock at the fault
  std::vector<std::pair<double, std::string>> marks_;  // seconds after the fault
};

// Lines of a process log that a recovery's timeline shows.
bool TellsRecovery(const std::string& line);

}  // namespace seam::cli::chaos
