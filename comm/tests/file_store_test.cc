// FileStore and PrefixStore: write-once keys, waiting Get with a deadline
// that names the key, and prefixes that keep groups apart.
#include <thread>

#include "comm_test_util.h"

namespace seam::comm {
namespace {

std::vector<char> Bytes(const std::string& s) { return std::vector<char>(s.begin(), s.end()); }

TEST(FileStoreTest, SetThenGetReturnsTheValueForAnyKey) {
  testing::TempDir dir;
  auto store = MakeFileStore(dir.path() + "/nested");
  ASSERT_TRUE(store.ok()) << store.status();
  for (const std::string key : {"plain", "tp/rank_0", "odd key %/.."}) {
    ASSERT_TRUE((*store)->Set(key, Bytes("value of " + key)).ok());
  }
  for (const std::string key : {"plain", "tp/rank_0", "odd key %/.."}) {
    auto v = (*store)->Get(key, absl::Seconds(1));
    ASSERT_TRUE(v.ok()) << v.status();
    EXPECT_EQ(*v, Bytes("value of " + key));
  }
}

TEST(FileStoreTest, GetOfAMissingKeyGivesDeadlineExceededNamingTheKey) {
  testing::TempDir dir;
  auto store = MakeFileStore(dir.path());
  ASSERT_TRUE(store.ok());
  auto v = (*store)->Get("tp/0", absl::Milliseconds(50));
  EXPECT_EQ(v.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(v.status().message(), "store key 'tp/0' did not appear within 50ms");
}

TEST(FileStoreTest, GetWaitsForAKeySetLater) {
  testing::TempDir dir;
  auto store = MakeFileStore(dir.path());
  ASSERT_TRUE(store.ok());
  std::thread setter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_TRUE((*store)->Set("late", Bytes("here")).ok());
  });
  auto v = (*store)->Get("late", absl::Seconds(5));
  setter.join();
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(*v, Bytes("here"));
}

TEST(FileStoreTest, KeysAreWrittenOnce) {
  testing::TempDir dir;
  auto store = MakeFileStore(dir.path());
  ASSERT_TRUE(store.ok());
  ASSERT_TRUE((*store)->Set("k", Bytes("1")).ok());
  absl::Status s = (*store)->Set("k", Bytes("2"));
  EXPECT_EQ(s.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(std::string(s.message()), ::testing::HasSubstr("store key 'k' already exists in " + dir.path()));
  EXPECT_EQ(*(*store)->Get("k", absl::Seconds(1)), Bytes("1"));
}

TEST(FileStoreTest, PrefixStoreKeepsGroupsApart) {
  testing::TempDir dir;
  auto store = MakeFileStore(dir.path());
  ASSERT_TRUE(store.ok());
  auto a = MakePrefixStore("attn_dp.r0", *store);
  auto b = MakePrefixStore("attn_dp.r1", *store);
  ASSERT_TRUE(a->Set("0", Bytes("a")).ok());
  ASSERT_TRUE(b->Set("0", Bytes("b")).ok());
  EXPECT_EQ(*a->Get("0", absl::Seconds(1)), Bytes("a"));
  EXPECT_EQ(*(*store)->Get("attn_dp.r1/0", absl::Seconds(1)), Bytes("b"));
  auto missing = b->Get("1", absl::Milliseconds(10));
  EXPECT_EQ(missing.status().message(), "store key 'attn_dp.r1/1' did not appear within 10ms");
}

TEST(FileStoreTest, UnusableDirectoryIsInvalidArgument) {
  auto store = MakeFileStore("/proc/self/no_such_dir");
  EXPECT_EQ(store.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(store.status().message()),
              ::testing::HasSubstr("file store directory '/proc/self/no_such_dir' cannot be created"));
}

}  // namespace
}  // namespace seam::comm
