// Progress: the plain lines a pipe or a log file gets, the terminal redraw,
// and the process-wide switch.
#include "seam/core/progress.h"

#include <fcntl.h>
#include <unistd.h>

#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace seam {
namespace {

using Clock = std::chrono::steady_clock;

// A clock the test moves by hand.
struct FakeClock {
  Clock::time_point t{};
  std::function<Clock::time_point()> Fn() {
    return [this] { return t; };
  }
};

ProgressOptions Plain(std::vector<std::string>* lines, FakeClock* clock) {
  ProgressOptions o;
  o.mode = ProgressMode::kPlain;
  o.plain_line = [lines](const std::string& line) { lines->push_back(line); };
  o.now = clock->Fn();
  return o;
}

TEST(ProgressPlain, FourShardsGiveOneLinePerShardAndTheEnd) {
  std::vector<std::string> lines;
  FakeClock clock;
  {
    Progress p("loading weights", 4, ProgressUnit::kItems, Plain(&lines, &clock));
    for (int i = 1; i <= 4; ++i) {
      clock.t += std::chrono::seconds(1);
      p.Advance(1, "model-0000" + std::to_string(i) + "-of-00004.safetensors");
    }
  }
  const std::vector<std::string> want = {
      "loading weights: started, 4",
      "loading weights: [######..................] 25% (1 of 4) model-00001-of-00004.safetensors",
      "loading weights: [############............] 50% (2 of 4) model-00002-of-00004.safetensors",
      "loading weights: [##################......] 75% (3 of 4) model-00003-of-00004.safetensors",
      "loading weights: done, 4 in 4.0 s",
  };
  EXPECT_EQ(lines, want);
}

TEST(ProgressPlain, ManySmallStepsWriteAtMostOneLinePerTenth) {
  std::vector<std::string> lines;
  FakeClock clock;
  Progress p("allocating KV cache", 1000 << 20, ProgressUnit::kBytes, Plain(&lines, &clock));
  for (int i = 0; i < 1000; ++i) {
    clock.t += std::chrono::milliseconds(20);
    p.Advance(1 << 20);
  }
  p.Finish();
  ASSERT_EQ(lines.size(), 11u);  // started, 10% .. 90%, done
  EXPECT_EQ(lines.front(), "allocating KV cache: started, 1000.0 MiB");
  EXPECT_EQ(lines[1], "allocating KV cache: [##......................] 10% (100.0 MiB of 1000.0 MiB)");
  EXPECT_EQ(lines[9], "allocating KV cache: [#####################...] 90% (900.0 MiB of 1000.0 MiB)");
  EXPECT_EQ(lines.back(), "allocating KV cache: done, 1000.0 MiB in 20.0 s");
}

TEST(ProgressPlain, AQuickStepWritesOnlyItsFirstAndLastLines) {
  std::vector<std::string> lines;
  FakeClock clock;
  {
    Progress p("drawing random weights", 47, ProgressUnit::kItems, Plain(&lines, &clock));
    for (int i = 0; i < 47; ++i) {
      clock.t += std::chrono::milliseconds(10);
      p.Advance(1);
    }
  }
  EXPECT_EQ(lines, (std::vector<std::string>{"drawing random weights: started, 47",
                                             "drawing random weights: done, 47 in 0.5 s"}));
}

TEST(ProgressPlain, FailSaysWhereItStoppedAndLaterCallsAreIgnored) {
  std::vector<std::string> lines;
  FakeClock clock;
  Progress p("writing checkpoint", int64_t{3} << 30, ProgressUnit::kBytes, Plain(&lines, &clock));
  clock.t += std::chrono::seconds(1);
  p.Advance(int64_t{1} << 30);
  clock.t += std::chrono::seconds(2);
  p.Fail();
  p.Advance(int64_t{2} << 30);
  p.Finish();
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[1], "writing checkpoint: [########................] 33% (1.00 GiB of 3.00 GiB)");
  EXPECT_EQ(lines[2], "writing checkpoint: stopped at 1.00 GiB of 3.00 GiB in 3.0 s");
}

TEST(ProgressPlain, UnknownTotalCountsWithoutPercentages) {
  std::vector<std::string> lines;
  FakeClock clock;
  {
    Progress p("scanning", 0, ProgressUnit::kItems, Plain(&lines, &clock));
    p.Advance(7);
  }
  EXPECT_EQ(lines, (std::vector<std::string>{"scanning: started", "scanning: done, 7 in 0.0 s"}));
}

TEST(ProgressTerminal, RedrawsOneLineInPlaceAtMostTenTimesASecond) {
  char path[] = "/tmp/seam-progress-XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  FakeClock clock;
  ProgressOptions o;
  o.mode = ProgressMode::kTerminal;
  o.terminal_fd = fd;
  o.now = clock.Fn();
  {
    Progress p("writing", 4, ProgressUnit::kItems, o);
    p.Advance(1, "a");  // within 100 ms of the first draw: not drawn
    clock.t += std::chrono::milliseconds(150);
    p.Advance(1, "b");
    p.Advance(2, "c");  // the whole: drawn at once
    clock.t += std::chrono::milliseconds(250);
  }
  std::string out(4096, '\0');
  const ssize_t n = pread(fd, out.data(), out.size(), 0);
  close(fd);
  unlink(path);
  ASSERT_GT(n, 0);
  out.resize(static_cast<size_t>(n));
  EXPECT_EQ(out,
            "\r\x1b[Kwriting: [........................] 0% (0 of 4)"
            "\r\x1b[Kwriting: [############............] 50% (2 of 4) b"
            "\r\x1b[Kwriting: [########################] 100% (4 of 4) c"
            "\r\x1b[Kwriting: done, 4 in 0.4 s\n");
}

TEST(ProgressMode, OffByDefaultSoLibrariesAndTestsStayQuiet) {
  unsetenv("SEAM_PROGRESS");
  EXPECT_EQ(CurrentProgressMode(), ProgressMode::kOff);
  std::vector<std::string> lines;
  ProgressOptions o;
  o.plain_line = [&lines](const std::string& line) { lines.push_back(line); };
  {
    Progress p("quiet", 2, ProgressUnit::kItems, o);
    EXPECT_EQ(p.mode(), ProgressMode::kOff);
    p.Advance(2);
  }
  EXPECT_TRUE(lines.empty());
}

TEST(ProgressMode, AutoIsPlainWhenStderrIsNotATerminalAndTheEnvironmentWins) {
  unsetenv("SEAM_PROGRESS");
  SetProgressMode(ProgressMode::kAuto);
  ProgressOptions o;
  o.terminal_fd = open("/dev/null", O_WRONLY);  // not a terminal
  o.plain_line = [](const std::string&) {};
  EXPECT_EQ(Progress("x", 1, ProgressUnit::kItems, o).mode(), ProgressMode::kPlain);
  setenv("SEAM_PROGRESS", "off", 1);
  SetProgressMode(ProgressMode::kAuto);
  EXPECT_EQ(CurrentProgressMode(), ProgressMode::kOff);
  unsetenv("SEAM_PROGRESS");
  SetProgressMode(ProgressMode::kOff);
  close(o.terminal_fd);
}

TEST(FormatBytes, PicksTheUnitAndKeepsThreeFigures) {
  EXPECT_EQ(FormatBytes(512), "512 B");
  EXPECT_EQ(FormatBytes(1536), "1.50 KiB");
  EXPECT_EQ(FormatBytes(int64_t{12} << 20), "12.0 MiB");
  EXPECT_EQ(FormatBytes(int64_t{3} << 40), "3.00 TiB");
}

}  // namespace
}  // namespace seam
