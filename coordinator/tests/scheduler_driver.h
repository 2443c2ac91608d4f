// Test driver for the scheduler: keeps the microbatches handed out, answers
// them with a chosen sampler and collects the events, with no processes.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "seam/coordinator/scheduler.h"

namespace seam::coordinator::testing {

// The small setting the scheduler tests start from: one stage and DP group,
// 64 KV blocks of 4 tokens, microbatches of at most 64 tokens and 8 sequences.
inline SchedulerOptions SmallOptions() {
  SchedulerOptions o;
  o.pipeline_stages = 1;
  o.dp_groups = 1;
  o.kv_blocks_per_dp_group = 64;
  o.block_size = 4;
  o.max_tokens_per_microbatch = 64;
  o.max_sequences_per_microbatch = 8;
  o.max_queue = 64;
  return o;
}

struct SchedulerDriver {
  explicit SchedulerDriver(const SchedulerOptions& options) {
    auto created = Scheduler::Create(options);
    EXPECT_TRUE(created.ok()) << created.status();
    scheduler = std::move(created).value();
  }

  void Submit(const std::string& id, int prompt, int max_new,
              std::vector<int32_t> stops = {}) {
    Request r;
    r.id = id;
    r.prompt_tokens = prompt;
    r.max_new_tokens = max_new;
    r.stop_token_ids = std::move(stops);
    absl::Status s = scheduler->Submit(r);
    ASSERT_TRUE(s.ok()) << s;
  }

  // Next() that must yield a microbatch.
  Microbatch MustNext() {
    std::optional<Microbatch> mb = scheduler->Next();
    EXPECT_TRUE(mb.has_value());
    if (!mb.has_value()) return Microbatch{};
    return *mb;
  }

  // Completes `mb` with `sampler(entry)` as every sampled token.
  std::vector<SchedulerEvent> Complete(const Microbatch& mb) {
    std::vector<SequenceResult> results;
    for (const auto& group : mb.entries_by_group) {
      for (const auto& e : group) {
        SequenceResult r;
        r.request_id = e.request_id;
        r.token = e.is_last_chunk ? sampler(e) : -1;
        for (int k = 0; mb.decode_steps > 1 && k < mb.decode_steps; ++k) {
          MicrobatchEntry at = e;  // step k feeds position start_position + k
          at.start_position += k;
          r.tokens.push_back(sampler(at));
        }
        results.push_back(r);
      }
    }
    auto events = scheduler->Complete(mb.id, results);
    EXPECT_TRUE(events.ok()) << events.status();
    if (!events.ok()) return {};
    Record(*events);
    return *events;
  }

  void Record(const std::vector<SchedulerEvent>& events) {
    all_events.insert(all_events.end(), events.begin(), events.end());
  }

  // Runs Next / Complete (oldest first) until nothing is live; bounded.
  void Drain(int max_steps = 10000) {
    std::vector<Microbatch> out;
    for (int step = 0; step < max_steps; ++step) {
      while (auto mb = scheduler->Next()) out.push_back(*mb);
      if (out.empty()) return;
      Microbatch mb = out.front();
      out.erase(out.begin());
      Complete(mb);
    }
    ADD_FAILURE() << "did not drain in " << max_steps << " steps";
  }

  std::vector<int32_t> TokensOf(const std::string& id) const {
    std::vector<int32_t> tokens;
    for (const auto& e : all_events) {
      if (e.request_id == id && e.kind == SchedulerEvent::Kind::kToken) tokens.push_back(e.token);
    }
    return tokens;
  }

  std::vector<SchedulerEvent> TerminalOf(const std::string& id) const {
    std::vector<SchedulerEvent> ends;
    for (const auto& e : all_events) {
      if (e.request_id == id && e.kind != SchedulerEvent::Kind::kToken) ends.push_back(e);
    }
    return ends;
  }

  std::unique_ptr<Scheduler> scheduler;
  std::function<int32_t(const MicrobatchEntry&)> sampler = [](const MicrobatchEntry&) {
    return 7;
  };
  std::vector<SchedulerEvent> all_events;
};

// Request ids of a microbatch, in group then entry order.
inline std::vector<std::string> IdsOf(const Microbatch& mb) {
  std::vector<std::string> ids;
  for (const auto& group : mb.entries_by_group) {
    for (const auto& e : group) ids.push_back(e.request_id);
  }
  return ids;
}

}  // namespace seam::coordinator::testing
