// `seam logits` (RunLogitsCommand) on the committed LongCat-Flash fixture
// that transformers 5.17 saved (tests/fixtures/golden/longcat_flash): the
// rows it writes are transformers' fp32 logits within 1e-4 relative (seam
// and torch sum in different orders; golden_test holds seam's model to the
// same), its greedy tokens are transformers', and fed transformers' tokens
// with --forced it writes the same rows. Bad inputs are refused by name.
#include "logits_command.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "seam/core/device_memory.h"
#include "seam/weights/safetensors.h"

namespace seam::cli {
namespace {

using json = nlohmann::json;

const std::string kFixture = std::string(SEAM_FIXTURES_DIR) + "/golden/longcat_flash";

std::string TempPrefix(const std::string& name) {
  return ::testing::TempDir() + "/logits_" + name + "_" + std::to_string(::getpid());
}

std::string WriteJson(const std::string& name, const json& j) {
  const std::string path = TempPrefix(name) + ".json";
  std::ofstream(path) << j.dump();
  return path;
}

json GoldenRecord() {
  std::ifstream in(kFixture + "/golden.json");
  return json::parse(in);
}

std::vector<float> ReadFloats(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<float> v(bytes.size() / sizeof(float));
  std::copy(bytes.data(), bytes.data() + v.size() * sizeof(float), reinterpret_cast<char*>(v.data()));
  return v;
}

std::vector<float> Golden(const weights::SafetensorsFile& file, const std::string& name) {
  auto t = file.View(name);
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? t->ToFloats() : std::vector<float>{};
}

// max |a - b| / max |b| over `count` floats from a[offset].
double RelativeError(const std::vector<float>& a, size_t offset, const std::vector<float>& b) {
  double max_abs = 0, max_ref = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    max_abs = std::max(max_abs, std::fabs(double(a[offset + i]) - b[i]));
    max_ref = std::max(max_ref, std::fabs(double(b[i])));
  }
  return max_abs / max_ref;
}

// Runs the command on the fixture's prompts; returns the .bin's floats and the .json.
std::pair<std::vector<float>, json> RunCommand(const std::string& name, bool forced,
                                               const std::string& device = "cpu") {
  const json record = GoldenRecord();
  LogitsCommandOptions o;
  o.model_dir = kFixture;
  o.device = device;
  o.prompts = WriteJson(name + "_prompts", record["prompts"]);
  if (forced) o.forced = WriteJson(name + "_forced", record["tokens"]);
  o.new_tokens = 4;
  o.out = TempPrefix(name);
  std::ostringstream out;
  const absl::Status s = RunLogitsCommand(o, out);
  EXPECT_TRUE(s.ok()) << s;
  std::ifstream meta(o.out + ".json");
  return {ReadFloats(o.out + ".bin"), json::parse(meta)};
}

// The rows of `device` (cpu or cuda) against transformers', greedy and forced.
void ExpectTransformersRows(const std::string& device) {
  const json record = GoldenRecord();
  auto golden = weights::SafetensorsFile::Open(kFixture + "/golden.safetensors");
  ASSERT_TRUE(golden.ok()) << golden.status();
  for (bool forced : {false, true}) {
    const auto [floats, meta] = RunCommand(device + (forced ? "_forced" : "_greedy"), forced, device);
    ASSERT_EQ(meta["device"].get<std::string>(), device);
    ASSERT_EQ(meta["vocab"].get<int64_t>(), 256);
    ASSERT_EQ(meta["forced"].get<bool>(), forced);
    size_t offset = 0;
    for (size_t p = 0; p < record["prompts"].size(); ++p) {
      const std::vector<float> prefill = Golden(**golden, "prefill_logits_" + std::to_string(p));
      const std::vector<float> decode = Golden(**golden, "decode_logits_" + std::to_string(p));
      ASSERT_GE(floats.size(), offset + prefill.size() + decode.size());
      // fp32, 1e-4 relative: seam and torch sum in different orders.
      EXPECT_LE(RelativeError(floats, offset, prefill), 1e-4) << "prompt " << p << " prefill";
      EXPECT_LE(RelativeError(floats, offset + prefill.size(), decode), 1e-4) << "prompt " << p << " decode";
      offset += prefill.size() + decode.size();
      EXPECT_EQ(meta["prompts"][p]["prefill_rows"].get<int64_t>(), int64_t(record["prompts"][p].size()));
      EXPECT_EQ(meta["prompts"][p]["tokens"], record["tokens"][p]) << "prompt " << p;
    }
    EXPECT_EQ(floats.size(), offset);
  }
}

TEST(LogitsCommand, WritesTransformersLogitsAndGreedyTokens) { ExpectTransformersRows("cpu"); }

// The same on GPU 0, fp32 (the tolerance as on the host).
TEST(LogitsCommand, WritesTransformersLogitsOnTheGpu) {
  if (!CudaAvailable()) GTEST_SKIP() << "no CUDA device";
  ExpectTransformersRows("cuda");
}

TEST(LogitsCommand, RefusesBadInputsByName) {
  LogitsCommandOptions o;
  o.model_dir = kFixture;
  o.out = TempPrefix("refused");
  std::ostringstream out;
  o.prompts = WriteJson("bad_token", json::array({json::array({1, 999})}));
  absl::Status s = RunLogitsCommand(o, out);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("outside the vocabulary"), std::string::npos) << s;
  o.prompts = WriteJson("ok", json::array({json::array({1, 2})}));
  o.forced = WriteJson("short", json::array({json::array({3})}));
  s = RunLogitsCommand(o, out);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("--forced"), std::string::npos) << s;
  o.forced.clear();
  o.device = "tpu";
  EXPECT_EQ(RunLogitsCommand(o, out).code(), absl::StatusCode::kInvalidArgument);
  o.device = "cpu";
  o.prompts = "/nonexistent/prompts.json";
  s = RunLogitsCommand(o, out);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("--prompts"), std::string::npos) << s;
}

}  // namespace
}  // namespace seam::cli
