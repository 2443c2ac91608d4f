// Stop-string matching with held-back partial matches (see stop_strings.h).
#include "stop_strings.h"

#include <algorithm>

namespace seam::coordinator {

StopStrings::StopStrings(std::vector<std::string> stops) {
  for (std::string& s : stops) {
    if (!s.empty()) stops_.push_back(std::move(s));
  }
}

StopStrings::Step StopStrings::Push(std::string_view text) {
  Step step;
  if (stopped_) return step;
  std::string buffer = std::move(held_);
  held_.clear();
  buffer.append(text);
  // The earliest stop string in the buffer: a match can begin only in the
  // held tail or after it, since anything released began no stop string.
  size_t first = std::string::npos;
  for (const std::string& stop : stops_) first = std::min(first, buffer.find(stop));
  if (first != std::string::npos) {
    step.release = buffer.substr(0, first);
    step.stopped = stopped_ = true;
    return step;
  }
  // The longest tail that is a proper prefix of some stop string waits.
  size_t hold = 0;
  for (const std::string& stop : stops_) {
    for (size_t k = std::min(stop.size() - 1, buffer.size()); k > hold; --k) {
      if (buffer.compare(buffer.size() - k, k, stop, 0, k) == 0) {
        hold = k;
        break;
      }
    }
  }
  step.release = buffer.substr(0, buffer.size() - hold);
  held_ = buffer.substr(buffer.size() - hold);
  return step;
}

std::string StopStrings::Flush() {
  if (stopped_) return "";
  std::string out = std::move(held_);
  held_.clear();
  return out;
}

}  // namespace seam::coordinator
