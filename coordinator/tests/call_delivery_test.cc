// CallDelivery: one key's callbacks in order on one thread, off the caller,
// nothing lost at Drain, inline once drained or without lanes.
#include "call_delivery.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

namespace seam::coordinator {
namespace {

TEST(CallDelivery, EachKeysCallbacksRunInOrderOnOneThreadOffTheCaller) {
  constexpr int kKeys = 16, kPerKey = 200;
  std::vector<int> keys(kKeys);
  std::mutex mu;
  std::map<int, std::vector<int>> seen;
  std::map<int, std::vector<std::thread::id>> threads;
  {
    CallDelivery delivery(3);
    for (int i = 0; i < kPerKey; ++i) {
      for (int k = 0; k < kKeys; ++k) {
        delivery.Queue(&keys[k], [&, k, i] {
          std::lock_guard<std::mutex> lock(mu);
          seen[k].push_back(i);
          threads[k].push_back(std::this_thread::get_id());
        });
      }
      if (i % 7 == 0) delivery.Flush();
    }
    delivery.Drain();  // flushes the rest
  }
  for (int k = 0; k < kKeys; ++k) {
    ASSERT_EQ(seen[k].size(), static_cast<size_t>(kPerKey)) << "key " << k;
    for (int i = 0; i < kPerKey; ++i) EXPECT_EQ(seen[k][i], i) << "key " << k;
    for (const std::thread::id& t : threads[k]) {
      EXPECT_EQ(t, threads[k][0]) << "key " << k;
      EXPECT_NE(t, std::this_thread::get_id());
    }
  }
}

TEST(CallDelivery, NothingRunsBeforeFlush) {
  CallDelivery delivery(1);
  std::atomic<int> ran{0};
  int key = 0;
  delivery.Queue(&key, [&] { ran++; });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(ran.load(), 0);
  delivery.Drain();
  EXPECT_EQ(ran.load(), 1);
}

TEST(CallDelivery, WithoutLanesOrOnceDrainedCallbacksRunOnTheCaller) {
  int key = 0;
  std::vector<std::thread::id> where;
  CallDelivery inline_delivery(0);
  inline_delivery.Queue(&key, [&] { where.push_back(std::this_thread::get_id()); });
  EXPECT_TRUE(where.empty());
  inline_delivery.Flush();
  CallDelivery drained(2);
  drained.Drain();
  drained.Drain();  // idempotent
  drained.Queue(&key, [&] { where.push_back(std::this_thread::get_id()); });
  ASSERT_EQ(where.size(), 2u);
  EXPECT_EQ(where[0], std::this_thread::get_id());
  EXPECT_EQ(where[1], std::this_thread::get_id());
}

TEST(CallDelivery, DefaultLanesAreOnePerFourCoresFromOneToFour) {
  EXPECT_EQ(CallDelivery::DefaultLanes(0), 1);
  EXPECT_EQ(CallDelivery::DefaultLanes(2), 1);
  EXPECT_EQ(CallDelivery::DefaultLanes(8), 2);
  EXPECT_EQ(CallDelivery::DefaultLanes(16), 4);
  EXPECT_EQ(CallDelivery::DefaultLanes(128), 4);
}

}  // namespace
}  // namespace seam::coordinator
