// How a command's status reaches the shell: the exit codes every command
// documents, the "seam <command>: " message on stderr, and the codes of
// failures that come after the flags were accepted.
#include <sstream>

#include <gtest/gtest.h>

#include "command_status.h"

namespace seam::cli {
namespace {

TEST(CommandStatus, OkExitsZeroAndPrintsNothing) {
  std::ostringstream err;
  EXPECT_EQ(ReportStatus("seam check", absl::OkStatus(), err), 0);
  EXPECT_EQ(err.str(), "");
}

TEST(CommandStatus, InvalidArgumentExitsTwoAndEveryOtherErrorOne) {
  EXPECT_EQ(ExitCode(absl::InvalidArgumentError("--tp")), 2);
  EXPECT_EQ(ExitCode(absl::InternalError("MISMATCH")), 1);
  EXPECT_EQ(ExitCode(absl::NotFoundError("config.json")), 1);
  EXPECT_EQ(ExitCode(absl::UnavailableError("peer down")), 1);
  EXPECT_EQ(ExitCode(absl::FailedPreconditionError("refused")), 1);
}

TEST(CommandStatus, FailureIsPrintedAfterTheCommandNameWithOneNewline) {
  std::ostringstream one, two;
  EXPECT_EQ(ReportStatus("seam run", absl::InvalidArgumentError("--pp must be >= 1"), one), 2);
  EXPECT_EQ(one.str(), "seam run: --pp must be >= 1\n");
  EXPECT_EQ(ReportStatus("seam serve", absl::UnavailableError("stage 0 exited\n--- log ---\n"), two), 1);
  EXPECT_EQ(two.str(), "seam serve: stage 0 exited\n--- log ---\n");
}

TEST(CommandStatus, DescribedKeepsTheCodeAndNamesItInTheMessage) {
  const absl::Status s = Described("single rank: ", absl::InvalidArgumentError("num_attention_heads 4"));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "single rank: INVALID_ARGUMENT: num_attention_heads 4");
}

TEST(CommandStatus, FailureAfterTheFlagsIsNotReadAsABadFlag) {
  const absl::Status refused = Failed("step 2 failed: ", absl::InvalidArgumentError("token 100000"));
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(refused.message(), "step 2 failed: INVALID_ARGUMENT: token 100000");
  EXPECT_EQ(ExitCode(refused), 1);
  EXPECT_EQ(Failed("", absl::UnavailableError("peer down")).code(), absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace seam::cli
