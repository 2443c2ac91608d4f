// Randomized, seeded and bounded soak of the scheduler: random options and a
// random mix of submits, cancels, completions (out of order), per-sequence
// errors, Fail and FailAll, with the invariants checked after every step.
#include <map>
#include <random>
#include <set>

#include "gtest/gtest.h"
#include "seam/coordinator/scheduler.h"

namespace seam::coordinator {
namespace {

// What the test knows of one request, from the microbatches and events.
struct Model {
  Request request;
  int generated = 0;
  int32_t last_token = -1;
  int next_prefill = 0;  // expected start of the next prefill chunk
  int ends = 0;          // terminal events seen
};

class Soak {
 public:
  explicit Soak(uint32_t seed) : rng_(seed) {
    o_.pipeline_stages = Pick(1, 4);
    o_.dp_groups = Pick(1, 3);
    o_.block_size = Pick(1, 8);
    o_.kv_blocks_per_dp_group = Pick(4, 24);
    o_.max_tokens_per_microbatch = Pick(8, 64);
    o_.max_sequences_per_microbatch = Pick(1, 6);
    o_.max_inflight_microbatches = Pick(0, 3);
    o_.max_queue = Pick(1, 12);
    o_.chunked_prefill = Pick(0, 1) == 1;
    o_.prefill_chunk_tokens = Pick(1, 16);
    scheduler_ = std::move(Scheduler::Create(o_)).value();
    capacity_ = o_.kv_blocks_per_dp_group * o_.block_size;
  }

  // Returns the preemptions the scheduler made.
  uint64_t Run(int steps) {
    for (int step = 0; step < steps && !HasFailure(); ++step) {
      const int op = Pick(0, 99);
      if (op < 30) SubmitOne();
      else if (op < 36) CancelOne();
      else if (op < 38) FailOne();
      else if (op < 39 && Pick(0, 9) == 0) FailAll();
      else if (op < 65) NextOne();
      else CompleteOne();
      CheckInvariants();
    }
    for (int step = 0; step < 20000 && Live() > 0 && !HasFailure(); ++step) {
      if (!NextOne()) CompleteOne(/*oldest=*/true);
      CheckInvariants();
    }
    EXPECT_EQ(Live(), 0) << "requests left: the scheduler stopped making progress; queued "
                         << scheduler_->QueueDepth() << ", running " << scheduler_->RunningCount()
                         << ", free " << scheduler_->FreeBlocks(0) << ", chunked "
                         << o_.chunked_prefill << ", groups " << o_.dp_groups;
    for (int g = 0; g < o_.dp_groups; ++g) {
      EXPECT_EQ(scheduler_->FreeBlocks(g), o_.kv_blocks_per_dp_group) << "group " << g;
    }
    for (const auto& [id, m] : models_) EXPECT_EQ(m.ends, 1) << id;
    return scheduler_->PreemptionCount();
  }

 private:
  static bool HasFailure() { return ::testing::Test::HasFailure(); }
  int Pick(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }

  int Live() const {
    int live = 0;
    for (const auto& [id, m] : models_) live += m.ends == 0;
    return live;
  }

  void SubmitOne() {
    Request r;
    r.id = "r" + std::to_string(next_id_++);
    const int max_prompt = o_.chunked_prefill ? capacity_ - 1
                                              : std::min(capacity_ - 1, o_.max_tokens_per_microbatch);
    r.prompt_tokens = Pick(1, max_prompt);
    r.max_new_tokens = Pick(1, std::max(1, std::min(12, capacity_ - r.prompt_tokens)));
    if (Pick(0, 2) == 0) r.stop_token_ids = {Pick(0, 9)};
    absl::Status s = scheduler_->Submit(r);
    if (s.ok()) {
      models_[r.id].request = r;
    } else {
      EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
      EXPECT_GE(scheduler_->QueueDepth(), o_.max_queue);  // preempted ones may exceed it
    }
  }

  void CancelOne() {
    std::vector<std::string> live;
    for (const auto& [id, m] : models_) if (m.ends == 0) live.push_back(id);
    if (live.empty()) return;
    auto events = scheduler_->Cancel(live[Pick(0, static_cast<int>(live.size()) - 1)]);
    ASSERT_TRUE(events.ok()) << events.status();
    Record(events);
  }

  bool NextOne() {
    std::optional<Microbatch> mb = scheduler_->Next();
    if (!mb.has_value()) return false;
    EXPECT_EQ(mb->sequence_number, next_sequence_) << "each microbatch of an epoch takes the next number";
    next_sequence_ = mb->sequence_number + 1;
    EXPECT_GT(mb->num_sequences, 0);
    EXPECT_LE(mb->num_sequences, o_.max_sequences_per_microbatch);
    EXPECT_LE(mb->num_tokens, o_.max_tokens_per_microbatch);
    for (const auto& group : mb->entries_by_group) {
      for (const auto& e : group) CheckEntry(e);
    }
    out_.push_back(*mb);
    return true;
  }

  void CheckEntry(const MicrobatchEntry& e) {
    EXPECT_TRUE(in_flight_ids_.insert(e.request_id).second)
        << e.request_id << " is in two in-flight microbatches";
    Model& m = models_.at(e.request_id);
    EXPECT_EQ(m.ends, 0) << e.request_id << " scheduled after it ended";
    const int known = m.request.prompt_tokens + m.generated;
    if (e.is_prefill) {
      if (e.start_position == 0) m.next_prefill = 0;  // first prefill, or a recompute
      EXPECT_EQ(e.start_position, m.next_prefill) << e.request_id;
      m.next_prefill = e.start_position + e.num_tokens;
      EXPECT_LE(m.next_prefill, known);
      EXPECT_EQ(e.is_last_chunk, m.next_prefill == known) << e.request_id;
    } else {
      EXPECT_EQ(e.num_tokens, 1);
      EXPECT_EQ(e.start_position, known - 1) << e.request_id;
      EXPECT_EQ(e.input_token, m.last_token);
    }
  }

  void CompleteOne(bool oldest = false) {
    if (out_.empty()) return;
    const size_t i = oldest ? 0 : static_cast<size_t>(Pick(0, static_cast<int>(out_.size()) - 1));
    Microbatch mb = out_[i];
    out_.erase(out_.begin() + i);
    std::vector<SequenceResult> results;
    for (const auto& group : mb.entries_by_group) {
      for (const auto& e : group) {
        SequenceResult r{e.request_id, Pick(0, 30), absl::OkStatus()};
        if (Pick(0, 40) == 0) r.status = absl::InternalError("sequence error");
        results.push_back(r);
        // The sample of a recompute, or a decode, follows the tokens known.
        if (e.is_last_chunk && r.status.ok()) pending_tokens_[e.request_id] = r.token;
      }
    }
    Forget(mb);
    Record(scheduler_->Complete(mb.id, results));
  }

  void FailOne() {
    if (out_.empty()) return;
    const size_t i = static_cast<size_t>(Pick(0, static_cast<int>(out_.size()) - 1));
    Microbatch mb = out_[i];
    out_.erase(out_.begin() + i);
    Forget(mb);
    Record(scheduler_->Fail(mb.id, absl::UnavailableError("stage died")));
  }

  void FailAll() {
    Record(scheduler_->FailAll(absl::AbortedError("every stage restarts")));
    out_.clear();  // FailAll forgets every microbatch out
    in_flight_ids_.clear();
    next_sequence_ = 1;  // a new epoch counts from 1 again
  }

  void Forget(const Microbatch& mb) {
    for (const auto& group : mb.entries_by_group) {
      for (const auto& e : group) in_flight_ids_.erase(e.request_id);
    }
  }

  void Record(const absl::StatusOr<std::vector<SchedulerEvent>>& events) {
    ASSERT_TRUE(events.ok()) << events.status();
    for (const SchedulerEvent& e : *events) {
      Model& m = models_.at(e.request_id);
      EXPECT_EQ(m.ends, 0) << e.request_id << " has an event after its end";
      if (e.kind == SchedulerEvent::Kind::kToken) {
        EXPECT_EQ(e.token, pending_tokens_.at(e.request_id));
        m.generated += 1;
        m.last_token = e.token;
        EXPECT_LE(m.generated, m.request.max_new_tokens) << e.request_id;
      } else {
        m.ends += 1;
      }
    }
  }

  void CheckInvariants() {
    int queued_or_running = scheduler_->QueueDepth() + scheduler_->RunningCount();
    EXPECT_EQ(queued_or_running, Live()) << "lost or duplicated request";
    EXPECT_EQ(scheduler_->InFlightCount(), static_cast<int>(out_.size()));
    EXPECT_LE(scheduler_->InFlightCount(), scheduler_->options().max_inflight_microbatches);
    int running = 0;
    for (int g = 0; g < o_.dp_groups; ++g) {
      EXPECT_GE(scheduler_->FreeBlocks(g), 0);
      EXPECT_LE(scheduler_->FreeBlocks(g), o_.kv_blocks_per_dp_group);
      if (scheduler_->SequencesOnGroup(g) == 0) {
        EXPECT_EQ(scheduler_->FreeBlocks(g), o_.kv_blocks_per_dp_group) << "leaked blocks";
      }
      running += scheduler_->SequencesOnGroup(g);
    }
    EXPECT_EQ(running, scheduler_->RunningCount());
  }

  std::mt19937 rng_;
  SchedulerOptions o_;
  std::unique_ptr<Scheduler> scheduler_;
  int capacity_ = 0;
  int next_id_ = 0;
  uint64_t next_sequence_ = 1;
  std::map<std::string, Model> models_;
  std::map<std::string, int32_t> pending_tokens_;
  std::vector<Microbatch> out_;
  std::set<std::string> in_flight_ids_;
};

TEST(SchedulerSoakTest, InvariantsHoldUnderRandomTraffic) {
  uint64_t preemptions = 0;
  for (uint32_t seed = 1; seed <= 200; ++seed) {
    SCOPED_TRACE(::testing::Message() << "seed " << seed);
    preemptions += Soak(seed).Run(400);
    if (::testing::Test::HasFailure()) break;
  }
  EXPECT_GT(preemptions, 0u) << "the soak never reached the preemption path";
}

}  // namespace
}  // namespace seam::coordinator
