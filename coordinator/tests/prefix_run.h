// Prefix-caching scheduler tests' model of the stages: StageBlocks applies
// each microbatch's published / evicted blocks, frees and shared blocks as
// every stage does and checks the token at each position a step reads, so a
// wrong share or an early eviction shows as a wrong token, and an over-full
// group as a failure. PrefixRun drives a scheduler against it and counts the
// prefill tokens computed.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "scheduler_driver.h"
#include "seam/coordinator/scheduler.h"

namespace seam::coordinator::testing {

inline constexpr int kBlock = 4;

class StageBlocks {
 public:
  StageBlocks(int groups, int capacity) : capacity_(capacity), groups_(groups) {}

  // Applies `mb` as a stage does, writing each entry's tokens (`tokens` of
  // its request: prompt, then generated), after the frees of `ended`.
  void Run(const Microbatch& mb, const std::vector<std::string>& ended,
           const std::map<std::string, std::vector<int32_t>>& tokens) {
    for (const CachedBlockChange& p : mb.published) {
      Group& g = groups_[p.dp_group];
      ASSERT_LT(p.block_index, static_cast<int>(g.tables[p.request_id].size())) << p.request_id;
      const int phys = g.tables[p.request_id][p.block_index];
      ASSERT_TRUE(g.cached.emplace(p.block_id, phys).second) << "block " << p.block_id << " published twice";
      g.refs[phys] += 1;
    }
    for (const CachedBlockChange& e : mb.evicted) {
      Group& g = groups_[e.dp_group];
      ASSERT_EQ(g.cached.count(e.block_id), 1u) << "evicting unknown block " << e.block_id;
      Unref(g, g.cached[e.block_id]);
      g.cached.erase(e.block_id);
    }
    for (const std::string& id : ended) Free(id);
    for (const std::string& id : mb.preempted) Free(id);
    for (size_t d = 0; d < mb.entries_by_group.size(); ++d) {
      for (const MicrobatchEntry& e : mb.entries_by_group[d]) Write(groups_[d], e, tokens.at(e.request_id));
    }
  }

  int Used(int group) const { return static_cast<int>(groups_[group].refs.size()); }
  uint64_t shared_tokens = 0;

 private:
  struct Group {
    std::map<std::string, std::vector<int>> tables;
    std::map<uint64_t, int> cached;   // block id -> physical block
    std::map<int, int> refs;          // physical block -> holders (absent: free)
    std::map<int, std::vector<int32_t>> contents;
    int next = 0;
  };

  void Unref(Group& g, int phys) {
    if (--g.refs[phys] == 0) {
      g.refs.erase(phys);
      g.contents.erase(phys);
    }
  }
  void Free(const std::string& id) {
    for (Group& g : groups_) {
      auto it = g.tables.find(id);
      if (it == g.tables.end()) continue;
      for (int phys : it->second) Unref(g, phys);
      g.tables.erase(it);
    }
  }
  void Write(Group& g, const MicrobatchEntry& e, const std::vector<int32_t>& tokens) {
    std::vector<int>& table = g.tables[e.request_id];
    if (!e.shared_blocks.empty()) {
      ASSERT_TRUE(table.empty()) << e.request_id << " maps cached blocks into a table it holds";
      ASSERT_EQ(e.start_position, static_cast<int>(e.shared_blocks.size()) * kBlock);
      for (uint64_t id : e.shared_blocks) {
        ASSERT_EQ(g.cached.count(id), 1u) << e.request_id << " maps block " << id << ", which is not cached";
        table.push_back(g.cached[id]);
        g.refs[table.back()] += 1;
      }
      shared_tokens += static_cast<uint64_t>(e.start_position);
    }
    const int end = e.start_position + e.num_tokens;
    while (static_cast<int>(table.size()) * kBlock < end) {
      ASSERT_LT(static_cast<int>(g.refs.size()), capacity_) << "a stage's KV is over its capacity";
      table.push_back(g.next++);
      g.refs[table.back()] = 1;
      g.contents[table.back()].assign(kBlock, -1);
    }
    std::set<int> cached;
    for (const auto& [id, phys] : g.cached) cached.insert(phys);
    for (int p = e.start_position; p < end; ++p) {
      const int phys = table[p / kBlock];
      ASSERT_EQ(cached.count(phys), 0u) << e.request_id << " writes position " << p << " into a cached block";
      g.contents[phys][p % kBlock] = e.is_prefill ? tokens[p] : e.input_token;
    }
    for (int p = 0; p < end; ++p) {  // everything attention reads
      ASSERT_EQ(g.contents[table[p / kBlock]][p % kBlock], tokens[p]) << e.request_id << " position " << p;
    }
  }

  int capacity_;
  std::vector<Group> groups_;
};

// Runs a scheduler against StageBlocks until nothing is live; one
// microbatch in flight; tokens sampled as 1000 + position.
struct PrefixRun {
  explicit PrefixRun(SchedulerOptions o) : options(o), driver(o), stages(o.dp_groups, o.kv_blocks_per_dp_group) {
    driver.sampler = [](const MicrobatchEntry& e) { return 1000 + e.start_position + e.num_tokens; };
  }
  void Submit(const std::string& id, std::vector<int32_t> prompt, int max_new, const std::string& salt = "") {
    Request r;
    r.id = id;
    r.prompt_tokens = static_cast<int>(prompt.size());
    r.max_new_tokens = max_new;
    r.cache_tokens = prompt;
    r.cache_salt = salt;
    ASSERT_TRUE(driver.scheduler->Submit(r).ok());
    tokens[id] = std::move(prompt);
  }
  // One microbatch out and back; false when none was offered.
  bool Step() {
    std::optional<Microbatch> mb = driver.scheduler->Next();
    if (!mb) return false;
    Run(*mb);
    Finish(*mb);
    return true;
  }
  // The stages run `mb` (handed out by Next); the prefill tokens it
  // computes are counted.
  void Run(const Microbatch& mb) {
    stages.Run(mb, ended, tokens);
    ended.clear();
    for (const auto& group : mb.entries_by_group) {
      for (const auto& e : group) {
        placed[e.request_id] = e.dp_group;
        if (e.is_prefill) {
          prefilled[e.request_id] += e.num_tokens;
          prefill_tokens += e.num_tokens;
        }
      }
    }
  }
  // Completes `mb` (after Run).
  void Finish(const Microbatch& mb) {
    for (const SchedulerEvent& e : driver.Complete(mb)) {
      if (e.kind == SchedulerEvent::Kind::kToken) tokens[e.request_id].push_back(e.token);
      else ended.push_back(e.request_id);
    }
    last = mb;
  }
  // Cancels `id` (ends now unless in flight, as Scheduler::Cancel).
  void Cancel(const std::string& id) {
    auto events = driver.scheduler->Cancel(id);
    ASSERT_TRUE(events.ok()) << events.status();
    driver.Record(*events);
    for (const SchedulerEvent& e : *events) ended.push_back(e.request_id);
  }
  void Drain() {
    for (int i = 0; i < 10000 && Step(); ++i) {
    }
    EXPECT_EQ(driver.scheduler->RunningCount() + driver.scheduler->QueueDepth(), 0);
  }

  SchedulerOptions options;
  SchedulerDriver driver;
  StageBlocks stages;
  std::map<std::string, std::vector<int32_t>> tokens;
  std::map<std::string, int> placed;
  std::map<std::string, int> prefilled;  // prompt tokens computed (prefill entries), per request
  int prefill_tokens = 0;                // ... and in all
  std::vector<std::string> ended;
  Microbatch last;
};

inline SchedulerOptions Options(int blocks, int groups = 1) {
  SchedulerOptions o;
  o.block_size = kBlock;
  o.kv_blocks_per_dp_group = blocks;
  o.dp_groups = groups;
  o.prefix_caching = true;
  o.chunked_prefill = true;
  o.prefill_chunk_tokens = 8;
  o.max_tokens_per_microbatch = 64;
  o.max_inflight_microbatches = 1;
  return o;
}

inline std::vector<int32_t> Prompt(int shared, int unique, int32_t tag) {
  std::vector<int32_t> p;
  for (int i = 0; i < shared; ++i) p.push_back(i + 1);
  for (int i = 0; i < unique; ++i) p.push_back(500 + tag * 16 + i);
  return p;
}

}  // namespace seam::coordinator::testing
