// Stop strings over a stream of text: the text is released as it comes,
// except a tail that may begin a stop string, which is held back until it
// resolves (the next text completes the stop or shows it does not); when a
// stop string appears, the text before it is the last released and the
// stop string itself never is. Pure; one per sequence.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace seam::coordinator {

class StopStrings {
 public:
  // Empty strings in `stops` are ignored.
  explicit StopStrings(std::vector<std::string> stops);

  struct Step {
    std::string release;   // text that can be sent now
    bool stopped = false;  // a stop string appeared: `release` ends before it, nothing follows
  };
  // `text` follows what came before. After a stop, everything is dropped.
  Step Push(std::string_view text);
  // The end of the stream without a stop: the held-back tail (it began no
  // stop string after all).
  std::string Flush();

  bool empty() const { return stops_.empty(); }

 private:
  std::vector<std::string> stops_;
  std::string held_;
  bool stopped_ = false;
};

}  // namespace seam::coordinator
