// The driver's per-sequence decisions without processes: stop strings over a
// text stream (a partial match held back until it resolves, the stop text
// left out, nothing after it), a sequence's tokens to text with stop strings
// counted only from min_tokens on, and each sequence's own sampling seed.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "seam/core/sampling_seed.h"
#include "sequence_output.h"
#include "sequence_sampling.h"
#include "stop_strings.h"

namespace seam::coordinator {
namespace {

TEST(StopStrings, TextWithoutAStopIsReleasedAsItComes) {
  StopStrings stops({"STOP"});
  EXPECT_EQ(stops.Push("hello ").release, "hello ");
  EXPECT_EQ(stops.Push("world").release, "world");
  EXPECT_EQ(stops.Flush(), "");
}

TEST(StopStrings, APartialMatchIsHeldBackUntilItResolves) {
  StopStrings stops({"STOP"});
  StopStrings::Step a = stops.Push("say ST");
  EXPECT_EQ(a.release, "say ");  // "ST" may begin STOP
  EXPECT_FALSE(a.stopped);
  StopStrings::Step b = stops.Push("ART");
  EXPECT_EQ(b.release, "START");  // it did not
  StopStrings::Step c = stops.Push(" S");
  EXPECT_EQ(c.release, " ");
  EXPECT_EQ(stops.Flush(), "S");  // the end: what was held was text after all
}

TEST(StopStrings, AStopOverSeveralPiecesEndsTheTextBeforeIt) {
  StopStrings stops({"\n\n", "END"});
  EXPECT_EQ(stops.Push("one\n").release, "one");
  StopStrings::Step s = stops.Push("\ntwo");
  EXPECT_TRUE(s.stopped);
  EXPECT_EQ(s.release, "");
  EXPECT_EQ(stops.Push("three").release, "");  // nothing after a stop
  EXPECT_EQ(stops.Flush(), "");
}

TEST(StopStrings, TheEarliestStopWinsAndEmptyStopsAreIgnored) {
  StopStrings stops({"", "b", "abc"});
  StopStrings::Step s = stops.Push("xxabcd");
  EXPECT_TRUE(s.stopped);
  EXPECT_EQ(s.release, "xx");  // "abc" starts at 2, before "b" at 3
}

// Token i decodes to pieces[i].
class PieceText : public TokenText {
 public:
  explicit PieceText(std::vector<std::string> pieces) : pieces_(std::move(pieces)) {}
  std::string Push(int32_t token) override { return pieces_.at(static_cast<size_t>(token)); }
  std::string Flush() override { return ""; }

 private:
  std::vector<std::string> pieces_;
};

TEST(SequenceOutput, StopsAtAStopStringSplitOverTokens) {
  SequenceOutput out(std::make_unique<PieceText>(std::vector<std::string>{"The ", "answer", " is", " 4", ".\n", "\nMore"}),
                     {"\n\n"}, 0);
  std::string text;
  bool stopped = false;
  for (int32_t t = 0; t < 6 && !stopped; ++t) {
    SequenceOutput::Piece p = out.Push(t);
    text += p.text;
    stopped = p.stopped;
  }
  EXPECT_TRUE(stopped);
  EXPECT_EQ(text, "The answer is 4.");
  EXPECT_TRUE(out.Push(2).text.empty());  // a token a stage ran past the stop: dropped
  EXPECT_EQ(out.Finish(), "");
}

TEST(SequenceOutput, StopStringsCountFromMinTokensOn) {
  SequenceOutput out(std::make_unique<PieceText>(std::vector<std::string>{"END", "x", "END"}), {"END"}, 3);
  EXPECT_EQ(out.Push(0).text, "END");  // 1 token: too early to stop
  EXPECT_EQ(out.Push(1).text, "x");
  SequenceOutput::Piece p = out.Push(2);
  EXPECT_TRUE(p.stopped);
  EXPECT_EQ(p.text, "");
}

TEST(SequenceOutput, WithoutATokenizerThereIsNoText) {
  SequenceOutput out(nullptr, {}, 0);
  EXPECT_EQ(out.Push(5).text, "");
  EXPECT_FALSE(out.stopped());
  EXPECT_EQ(out.Finish(), "");
}

TEST(SequenceSampling, EachSequenceOfACallHasItsOwnSeedAndTheFirstKeepsTheCalls) {
  v1::SamplingParams call;
  call.set_seed(1234);
  call.set_temperature(0.7f);
  std::set<uint64_t> seeds;
  for (int i = 0; i < 64; ++i) seeds.insert(SamplingOfSequence(call, i, 5).seed());
  EXPECT_EQ(seeds.size(), 64u);
  EXPECT_EQ(SamplingOfSequence(call, 0, 5).seed(), 1234u);
  EXPECT_EQ(SamplingOfSequence(call, 3, 5).seed(), SequenceSeed(1234, 3));
  // Derived from the call's seed alone: another call with the same seed draws the same.
  EXPECT_EQ(SamplingOfSequence(call, 3, 9).seed(), SamplingOfSequence(call, 3, 5).seed());
  EXPECT_EQ(SamplingOfSequence(call, 3, 5).prompt_tokens(), 5u);
}

TEST(SequenceSampling, StopTokensAreMaskedUntilMinTokens) {
  v1::SamplingParams call;
  call.set_seed(1);
  call.add_stop_token_ids(7);
  call.add_stop_token_ids(8);
  EXPECT_EQ(SamplingOfSequence(call, 0, 1).min_tokens_masked_size(), 0);
  call.set_min_tokens(4);
  const v1::SequenceSampling s = SamplingOfSequence(call, 0, 1);
  EXPECT_EQ(s.min_tokens(), 4u);
  EXPECT_EQ(std::vector<int32_t>(s.min_tokens_masked().begin(), s.min_tokens_masked().end()),
            (std::vector<int32_t>{7, 8}));
}

TEST(SequenceSampling, FreshSeedsDiffer) {
  std::set<uint64_t> seeds;
  for (int i = 0; i < 16; ++i) seeds.insert(FreshSeed());
  EXPECT_GT(seeds.size(), 14u);
}

}  // namespace
}  // namespace seam::coordinator
