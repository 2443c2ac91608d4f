// Test scaffolding for comm: temporary store directories, running one
// function per rank on its own thread, and creating groups of real Gloo or
// recording communicators.
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/status/statusor.h"
#include "seam/comm/gloo_communicator.h"
#include "seam/comm/recording_communicator.h"
#include "seam/comm/store.h"
#include "seam/testing/temp_dir.h"

namespace seam::comm::testing {

using seam::testing::TempDir;

// Runs fn(rank) for every rank on its own thread and joins them.
inline void RunRanks(int n, const std::function<void(int)>& fn) {
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) threads.emplace_back(fn, r);
  for (auto& t : threads) t.join();
}

using Group = std::vector<std::unique_ptr<Communicator>>;

// n Gloo communicators of group `name` connected through a FileStore in `dir`.
inline Group MakeGlooGroup(int n, const std::string& dir, CommOptions options, const std::string& name = "tp") {
  auto store = MakeFileStore(dir);
  EXPECT_TRUE(store.ok()) << store.status();
  Group group(n);
  RunRanks(n, [&](int r) {
    auto comm = MakeGlooCommunicator(MakePrefixStore(name, *store), name, r, n, options);
    EXPECT_TRUE(comm.ok()) << comm.status();
    if (comm.ok()) group[r] = std::move(comm).value();
  });
  return group;
}

inline Group MakeRecordingGroup(const std::shared_ptr<RecordingWorld>& world) {
  Group group;
  for (int r = 0; r < world->size(); ++r) group.push_back(world->MakeCommunicator(r));
  return group;
}

}  // namespace seam::comm::testing
