// The `kind` label of seam:stage_step_seconds: what a microbatch's step
// held, read from its descriptor's entries.
#include <gtest/gtest.h>

#include "stage_metrics.h"

namespace seam::server {
namespace {

v1::MicrobatchDescriptor Holding(std::initializer_list<bool> prefill) {
  v1::MicrobatchDescriptor d;
  uint64_t id = 1;
  for (bool p : prefill) {
    v1::SequenceEntry* s = d.add_sequences();
    s->set_sequence_id(id++);
    s->set_is_prefill(p);
  }
  return d;
}

TEST(StepKind, DecodePrefillOrMixedByTheEntries) {
  EXPECT_EQ(StepKindOf(Holding({false, false})), StepKind::kDecode);
  EXPECT_EQ(StepKindOf(Holding({true})), StepKind::kPrefill);
  EXPECT_EQ(StepKindOf(Holding({true, true})), StepKind::kPrefill);
  EXPECT_EQ(StepKindOf(Holding({false, true, false})), StepKind::kMixed);
  EXPECT_EQ(StepKindOf(Holding({})), StepKind::kDecode);  // no prefill chunk
  EXPECT_STREQ(StepKindName(StepKind::kDecode), "decode");
  EXPECT_STREQ(StepKindName(StepKind::kPrefill), "prefill");
  EXPECT_STREQ(StepKindName(StepKind::kMixed), "mixed");
}

}  // namespace
}  // namespace seam::server
