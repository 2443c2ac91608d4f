// Annotate adds context to a status and keeps its code and payloads (the
// stage group's failing TP rank travels as a payload through annotations).
#include <gtest/gtest.h>

#include "absl/strings/cord.h"
#include "seam/core/status.h"

namespace seam {
namespace {

TEST(Annotate, KeepsTheCodeAndEveryPayloadAndPrefixesTheMessage) {
  absl::Status s = absl::UnavailableError("peer gone");
  s.SetPayload("type.seam.dev/tp_rank", absl::Cord("3"));
  const absl::Status a = Annotate(s, "rank 3 (dp 1, attn_tp 1)");
  EXPECT_EQ(a.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(a.message(), "rank 3 (dp 1, attn_tp 1): peer gone");
  ASSERT_TRUE(a.GetPayload("type.seam.dev/tp_rank").has_value());
  EXPECT_EQ(std::string(*a.GetPayload("type.seam.dev/tp_rank")), "3");
}

TEST(Annotate, LeavesOkAlone) { EXPECT_TRUE(Annotate(absl::OkStatus(), "context").ok()); }

}  // namespace
}  // namespace seam
