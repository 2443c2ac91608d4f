// The scheduler with prefix caching: hits, references, publication, LRU
// eviction under KV pressure, salts, DP placement and the epoch change.
// StageBlocks plays the stages' side of the block map (what every stage does
// with a descriptor's published / evicted blocks, frees and shared blocks)
// and checks each position's token, so a wrong share or an early eviction
// shows as a wrong token, and an over-full group as a failure.
#include <map>
#include <set>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "scheduler_driver.h"
#include "seam/coordinator/scheduler.h"

namespace seam::coordinator {
namespace {

constexpr int kBlock = 4;

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
    stages.Run(*mb, ended, tokens);
    ended.clear();
    for (const auto& group : mb->entries_by_group) {
      for (const auto& e : group) placed[e.request_id] = e.dp_group;
    }
    for (const SchedulerEvent& e : driver.Complete(*mb)) {
      if (e.kind == SchedulerEvent::Kind::kToken) tokens[e.request_id].push_back(e.token);
      else ended.push_back(e.request_id);
    }
    last = *mb;
    return true;
  }
  void Drain() {
    for (int i = 0; i < 10000 && Step(); ++i) {
    }
    EXPECT_EQ(driver.scheduler->RunningCount() + driver.scheduler->QueueDepth(), 0);
  }

  SchedulerOptions options;
  testing::SchedulerDriver driver;
  StageBlocks stages;
  std::map<std::string, std::vector<int32_t>> tokens;
  std::map<std::string, int> placed;
  std::vector<std::string> ended;
  Microbatch last;
};

SchedulerOptions Options(int blocks, int groups = 1) {
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

std::vector<int32_t> Prompt(int shared, int unique, int32_t tag) {
  std::vector<int32_t> p;
  for (int i = 0; i < shared; ++i) p.push_back(i + 1);
  for (int i = 0; i < unique; ++i) p.push_back(500 + tag * 16 + i);
  return p;
}

TEST(SchedulerPrefix, ALaterRequestMapsTheCachedPrefixAndPrefillsOnlyTheRest) {
  PrefixRun run(Options(64));
  run.Submit("a", Prompt(12, 2, 0), 2);
  run.Drain();
  EXPECT_EQ(run.driver.scheduler->CachedBlocks(0), 3);  // 12 tokens: 3 full blocks (a's 14th is partial)
  run.Submit("b", Prompt(12, 3, 1), 2);
  ASSERT_TRUE(run.Step());
  const MicrobatchEntry& first = run.last.entries_by_group[0][0];
  EXPECT_EQ(first.start_position, 12);
  EXPECT_EQ(first.num_tokens, 3);
  EXPECT_EQ(first.shared_blocks.size(), 3u);
  run.Drain();
  const PrefixCacheStats stats = run.driver.scheduler->PrefixStats();
  EXPECT_EQ(stats.queries, 2u);
  EXPECT_EQ(stats.query_tokens, 29u);
  EXPECT_EQ(stats.hit_tokens, 12u);
  EXPECT_EQ(run.stages.shared_tokens, 12u);
}

TEST(SchedulerPrefix, GeneratedBlocksAreCachedForTheNextTurn) {
  PrefixRun run(Options(64));
  run.Submit("turn1", Prompt(8, 0, 0), 9);  // KV of positions 0..15 once done: 4 full blocks
  run.Drain();
  EXPECT_EQ(run.driver.scheduler->CachedBlocks(0), 4);
  std::vector<int32_t> next(run.tokens["turn1"].begin(), run.tokens["turn1"].begin() + 16);
  next.push_back(3);  // the history, then the user's next turn
  run.Submit("turn2", next, 2);
  ASSERT_TRUE(run.Step());
  const MicrobatchEntry& first = run.last.entries_by_group[0][0];
  EXPECT_EQ(first.start_position, 16);
  EXPECT_EQ(first.shared_blocks.size(), 4u);
  run.Drain();
}

TEST(SchedulerPrefix, AWholePromptCachedStillComputesItsLastToken) {
  PrefixRun run(Options(64));
  run.Submit("a", Prompt(8, 0, 0), 1);
  run.Drain();
  run.Submit("b", Prompt(8, 0, 0), 1);
  ASSERT_TRUE(run.Step());
  const MicrobatchEntry& first = run.last.entries_by_group[0][0];
  EXPECT_EQ(first.start_position, 4);  // one block shared, the second computed for its logits
  EXPECT_EQ(first.num_tokens, 4);
  run.Drain();
}

TEST(SchedulerPrefix, RequestsOfDifferentSaltsOrWithoutCacheTokensShareNothing) {
  PrefixRun run(Options(64));
  run.Submit("a", Prompt(12, 1, 0), 1, "tenant-a");
  run.Drain();
  run.Submit("b", Prompt(12, 1, 1), 1, "tenant-b");
  ASSERT_TRUE(run.Step());
  EXPECT_TRUE(run.last.entries_by_group[0][0].shared_blocks.empty());
  run.Drain();
  Request r;
  r.id = "c";
  r.prompt_tokens = 13;
  r.max_new_tokens = 1;  // no cache_tokens: opted out
  ASSERT_TRUE(run.driver.scheduler->Submit(r).ok());
  run.tokens["c"] = Prompt(12, 1, 2);
  ASSERT_TRUE(run.Step());
  EXPECT_TRUE(run.last.entries_by_group[0][0].shared_blocks.empty());
  run.Drain();
  EXPECT_EQ(run.driver.scheduler->CachedBlocks(0), 6);  // a's 3 and b's 3; c cached none
}

TEST(SchedulerPrefix, CachedBlocksAreReleasedNotFreedWhenASequenceEnds) {
  PrefixRun run(Options(64));
  run.Submit("a", Prompt(8, 1, 0), 1);
  run.Drain();
  // a's two prompt blocks stay cached; its partial block and decode block are free.
  EXPECT_EQ(run.driver.scheduler->CachedBlocks(0), 2);
  EXPECT_EQ(run.driver.scheduler->FreeBlocks(0), 62);
}

TEST(SchedulerPrefix, UnreferencedBlocksAreEvictedBeforeAnyoneWaits) {
  PrefixRun run(Options(8));
  run.Submit("a", Prompt(16, 0, 0), 1);  // 4 cached blocks, then unreferenced
  run.Drain();
  EXPECT_EQ(run.driver.scheduler->CachedBlocks(0), 4);
  run.Submit("b", Prompt(0, 24, 1), 2);  // 7 blocks of 8: 3 cached ones must go
  run.Drain();
  EXPECT_EQ(run.driver.scheduler->PrefixStats().evictions, 3u);
  EXPECT_EQ(run.driver.scheduler->PreemptionCount(), 0u);
  EXPECT_EQ(run.tokens["b"].size(), 26u);
}

TEST(SchedulerPrefix, EvictionUnderPressureNeverTouchesARunningSequence) {
  // Many requests of two shared prefixes and long outputs on a small group:
  // blocks are cached, shared, evicted and preempted all the time, and
  // StageBlocks checks every position of every step.
  SchedulerOptions o = Options(24);
  o.max_tokens_per_microbatch = 24;
  PrefixRun run(o);
  for (int i = 0; i < 24; ++i) {
    std::vector<int32_t> prompt = Prompt(i % 2 ? 9 : 13, 1 + i % 5, i);
    if (i % 2) prompt[0] = 77;  // the second prefix differs from its first token
    run.Submit("r" + std::to_string(i), prompt, 6 + i % 7);
  }
  run.Drain();
  if (HasFailure()) return;
  const PrefixCacheStats stats = run.driver.scheduler->PrefixStats();
  EXPECT_GT(stats.hit_tokens, 0u);
  EXPECT_GT(stats.evictions, 0u);
  for (int i = 0; i < 24; ++i) {
    const std::string id = "r" + std::to_string(i);
    ASSERT_EQ(run.driver.TerminalOf(id).size(), 1u) << id;
    EXPECT_EQ(run.driver.TerminalOf(id)[0].kind, SchedulerEvent::Kind::kFinished) << id;
  }
  EXPECT_EQ(run.driver.scheduler->FreeBlocks(0) + run.driver.scheduler->CachedBlocks(0), 24);
}

TEST(SchedulerPrefix, APrefixGoesToTheDpGroupThatHoldsIt) {
  PrefixRun run(Options(64, 2));
  run.Submit("a", Prompt(12, 1, 0), 1);
  run.Drain();
  const int home = run.placed["a"];
  run.Submit("x", Prompt(0, 13, 9), 1);  // no shared prefix: the emptier group
  run.Submit("b", Prompt(12, 2, 1), 1);
  ASSERT_TRUE(run.Step());
  EXPECT_EQ(run.placed["b"], home);
  EXPECT_EQ(run.placed["x"], 1 - home);
  run.Drain();
}

TEST(SchedulerPrefix, FailAllDropsTheWholeCache) {
  PrefixRun run(Options(64));
  run.Submit("a", Prompt(12, 1, 0), 1);
  run.Drain();
  run.Submit("b", Prompt(12, 1, 1), 1);
  ASSERT_TRUE(run.driver.scheduler->FailAll(absl::UnavailableError("stage 1 died")).ok());
  EXPECT_EQ(run.driver.scheduler->CachedBlocks(0), 0);
  EXPECT_EQ(run.driver.scheduler->FreeBlocks(0), 64);
  run.Submit("c", Prompt(12, 1, 2), 1);
  std::optional<Microbatch> mb = run.driver.scheduler->Next();
  ASSERT_TRUE(mb.has_value());
  EXPECT_TRUE(mb->entries_by_group[0][0].shared_blocks.empty());
  EXPECT_TRUE(mb->evicted.empty());
}

TEST(SchedulerPrefix, OffMeansNoLookupAndNoPublication) {
  SchedulerOptions o = Options(64);
  o.prefix_caching = false;
  PrefixRun run(o);
  run.Submit("a", Prompt(12, 1, 0), 1);
  run.Drain();
  run.Submit("b", Prompt(12, 1, 1), 1);
  ASSERT_TRUE(run.Step());
  EXPECT_TRUE(run.last.entries_by_group[0][0].shared_blocks.empty());
  run.Drain();
  EXPECT_EQ(run.driver.scheduler->CachedBlocks(0), 0);
  EXPECT_EQ(run.driver.scheduler->PrefixStats().queries, 0u);
}

}  // namespace
}  // namespace seam::coordinator
