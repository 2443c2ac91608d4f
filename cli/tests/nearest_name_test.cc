// NearestName: the suggestion an unknown flag or subcommand gets; and how
// LogRelay tags a relayed line.
#include "nearest_name.h"

#include <gtest/gtest.h>

#include "log_relay.h"

namespace seam::cli {
namespace {

TEST(NearestName, ATypoGetsTheClosestFlag) {
  EXPECT_EQ(NearestName("--tesnor-parallel-size", {"--pp", "--tensor-parallel-size", "--tp"}),
            "--tensor-parallel-size");
  EXPECT_EQ(NearestName("--max-model-length", {"--max-num-seqs", "--max-model-len"}), "--max-model-len");
}

TEST(NearestName, AShortPrefixGetsTheNameItBegins) {
  EXPECT_EQ(NearestName("serv", {"plan", "run", "serve", "status"}), "serve");
  EXPECT_EQ(NearestName("--tensor-parallel", {"--tp", "--tensor-parallel-size"}), "--tensor-parallel-size");
}

TEST(NearestName, AWildGuessGetsNoSuggestion) {
  EXPECT_EQ(NearestName("--quantization", {"--tp", "--pp", "--host", "--port"}), "");
  EXPECT_EQ(NearestName("x", {}), "");
}

TEST(EditDistance, CountsInsertionsDeletionsAndSubstitutions) {
  EXPECT_EQ(EditDistance("kitten", "sitting"), 3);
  EXPECT_EQ(EditDistance("", "abc"), 3);
  EXPECT_EQ(EditDistance("same", "same"), 0);
}

TEST(LogRelay, TextLinesArePrefixedAndJsonLinesGetASourceMember) {
  EXPECT_EQ(LogRelay::Tagged("stage0", "[09:00:00.000] [stage] [info] ready"),
            "stage0 | [09:00:00.000] [stage] [info] ready");
  EXPECT_EQ(LogRelay::Tagged("coordinator", R"({"level":"info","msg":"up"})"),
            R"({"source":"coordinator","level":"info","msg":"up"})");
  EXPECT_EQ(LogRelay::Tagged("stage1", "{}"), R"({"source":"stage1"})");
}

}  // namespace
}  // namespace seam::cli
