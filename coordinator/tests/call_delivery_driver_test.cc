// The driver hands calls their tokens from delivery threads: a client that
// blocks in its callback holds up neither the stages nor the driver, and
// still gets every token in order once it goes on.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <thread>

#include "fake_pipeline.h"
#include "pipeline_driver.h"

namespace seam::coordinator {
namespace {

using testing::Pipeline;
using testing::Recorder;

// Blocks in its first OnToken until released.
class BlockingRecorder : public Recorder {
 public:
  explicit BlockingRecorder(size_t n) : Recorder(n), release_(gate_.get_future().share()) {}
  void OnToken(int i, const TokenOutput& t) override {
    if (!blocked_once_) {
      blocked_once_ = true;
      entered_.set_value();
      release_.wait();
    }
    Recorder::OnToken(i, t);
  }
  std::promise<void> entered_;
  std::promise<void> gate_;

 private:
  std::shared_future<void> release_;
  bool blocked_once_ = false;
};

TEST(CallDeliveryDriver, AClientBlockedInItsCallbackHoldsUpNeitherTheStagesNorItsOtherTokens) {
  PipelineDriverOptions o;
  o.delivery_threads = 2;
  Pipeline p(o);
  BlockingRecorder r(1);
  std::future<void> entered = r.entered_.get_future();
  p.Submit(r, {{10, 20, 30}}, /*max_new=*/6);
  ASSERT_EQ(entered.wait_for(std::chrono::seconds(5)), std::future_status::ready);
  // The client sits in its first token; the driver goes on: one prefill and
  // five single decode steps reach the last stage.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (p.fakes[1]->sent.load() < 6 && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  EXPECT_EQ(p.fakes[1]->sent.load(), 6);
  r.gate_.set_value();
  ASSERT_TRUE(r.Wait().ok());
  ASSERT_EQ(r.tokens[0].size(), 6u);
  // FakeLink samples (first input token + position + tokens) % 256: the
  // prefill's token, then each decode step's from the one before.
  int32_t expected = (10 + 0 + 3) % 256;
  for (size_t k = 0; k < r.tokens[0].size(); ++k) {
    EXPECT_EQ(r.tokens[0][k], expected) << "token " << k;
    expected = (expected + static_cast<int32_t>(3 + k) + 1) % 256;
  }
  EXPECT_EQ(r.finished, 1);
}

}  // namespace
}  // namespace seam::coordinator
