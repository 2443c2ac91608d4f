// The UCX error wrapper: codes chosen by what the caller should do, and a
// message naming the call, the file and the line.
#include "src/ucx_check.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace seam::handoff {
namespace {

using ::testing::HasSubstr;

absl::Status Fails(ucs_status_t status) {
  SEAM_UCS_RETURN_IF_ERROR(status);
  return absl::OkStatus();
}

TEST(UcxCheckTest, MapsErrorsToTheCodeACallerActsOn) {
  EXPECT_TRUE(Fails(UCS_OK).ok());
  EXPECT_EQ(Fails(UCS_ERR_TIMED_OUT).code(), absl::StatusCode::kDeadlineExceeded);
  for (ucs_status_t gone : {UCS_ERR_CONNECTION_RESET, UCS_ERR_UNREACHABLE, UCS_ERR_ENDPOINT_TIMEOUT,
                            UCS_ERR_CANCELED}) {
    EXPECT_EQ(Fails(gone).code(), absl::StatusCode::kUnavailable) << ucs_status_string(gone);
  }
  EXPECT_EQ(Fails(UCS_ERR_NO_MEMORY).code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(Fails(UCS_ERR_IO_ERROR).code(), absl::StatusCode::kInternal);
}

TEST(UcxCheckTest, MessageNamesCallFileLineAndUcxText) {
  const absl::Status status = Fails(UCS_ERR_UNREACHABLE);
  EXPECT_THAT(status.message(), HasSubstr("status failed at ucx_check_test.cc:"));
  EXPECT_THAT(status.message(), HasSubstr(ucs_status_string(UCS_ERR_UNREACHABLE)));
}

}  // namespace
}  // namespace seam::handoff
