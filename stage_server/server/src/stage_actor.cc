// The stage actor's mailbox loop, status snapshots and its microbatch and drain
// messages; microbatches themselves are run by MicrobatchRunner on this thread.
#include "seam/server/stage_actor.h"

#include <algorithm>
#include <chrono>
#include <future>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "microbatch_runner.h"
#include "request_checks.h"
#include "seam/core/logging.h"
#include "seam/core/status.h"

namespace seam::server {
namespace {

// The request ids of a microbatch's sequences, each once, in order: the
// request_ids field of every line logged while it runs.
std::string RequestIdsOf(const v1::MicrobatchDescriptor& d) {
  std::vector<std::string> ids;
  for (const v1::SequenceEntry& s : d.sequences()) {
    if (std::find(ids.begin(), ids.end(), s.server_request_id()) == ids.end()) ids.push_back(s.server_request_id());
  }
  return absl::StrJoin(ids, ",");
}

v1::MicrobatchResult ErrorResult(const v1::MicrobatchDescriptor& d, const absl::Status& why, uint32_t rank) {
  v1::MicrobatchResult result;
  result.set_microbatch_id(d.microbatch_id());
  result.mutable_error()->set_code(static_cast<int>(why.code()));
  result.mutable_error()->set_message(std::string(why.message()));
  result.mutable_error()->set_pipeline_rank(rank);
  return result;
}

}  // namespace

StageActor::StageActor(StageActorOptions options) : options_(std::move(options)) {}

absl::StatusOr<std::unique_ptr<StageActor>> StageActor::Start(StageActorOptions options) {
  std::unique_ptr<StageActor> actor(new StageActor(std::move(options)));
  std::promise<absl::Status> started;
  std::future<absl::Status> ready = started.get_future();
  actor->thread_ = std::thread([a = actor.get(), &started] { a->Loop(&started); });
  absl::Status status = ready.get();
  if (!status.ok()) {
    actor->thread_.join();
    return status;
  }
  return actor;
}

StageActor::~StageActor() {
  Drain(/*abandon=*/true, [](v1::StageStatus) {});
  {
    std::lock_guard<std::mutex> lock(mu_);
    quit_ = true;
    interrupt_ = true;
  }
  changed_.notify_all();
  thread_.join();
}

void StageActor::Post(std::function<void()> task) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    mailbox_.push_back(std::move(task));
  }
  changed_.notify_all();
}

void StageActor::Loop(std::promise<absl::Status>* started) {
  absl::StatusOr<std::unique_ptr<handoff::UcxWorker>> worker = handoff::UcxWorker::Create(options_.ucx);
  if (!worker.ok()) {
    started->set_value(Annotate(worker.status(), "creating the UCX worker"));
    return;
  }
  worker_ = std::move(*worker);
  {
    std::lock_guard<std::mutex> lock(mu_);
    worker_address_ = worker_->Address();
  }
  started->set_value(absl::OkStatus());
  while (true) {
    std::function<void()> task;
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (mailbox_.empty() && !quit_) {
        if (runner_ != nullptr && runner_->has_neighbours()) {
          // Idle with neighbours: keep the worker progressing so their
          // wire-up and sends move on, and take what arrives (late handoffs
          // and strays dropped, early ones held), polling the mailbox between rounds.
          lock.unlock();
          const bool progressed = runner_->Poll();
          const handoff::HandoffDrops drops = runner_->drops();
          lock.lock();
          drops_ = drops;
          if (!progressed && mailbox_.empty() && !quit_) changed_.wait_for(lock, std::chrono::milliseconds(2));
        } else {
          changed_.wait(lock, [this] { return !mailbox_.empty() || quit_; });
        }
      }
      if (mailbox_.empty()) {
        if (quit_) break;
        continue;
      }
      task = std::move(mailbox_.front());
      mailbox_.pop_front();
    }
    task();
  }
  AnswerUnanswered(absl::CancelledError("the stage stopped"));
  runner_.reset();
  worker_.reset();
}

v1::StageStatus StageActor::StatusLocked() const {
  v1::StageStatus s;
  s.set_state(state_);
  if (config_.has_value()) {
    *s.mutable_config() = *config_;
    s.mutable_config()->clear_handoff_key();  // a secret: never echoed
  }
  s.mutable_worker_address()->set_ucx_address(worker_address_);
  s.mutable_worker_address()->set_host(options_.host);
  s.set_microbatches_in_flight(in_flight_);
  s.set_last_sequence_number(last_sequence_number_);
  s.set_error(error_);
  if (limits_.kv_blocks_per_dp_group() > 0) *s.mutable_limits() = limits_;
  for (uint64_t free : kv_free_blocks_) s.add_kv_free_blocks(free);
  handoff::HandoffDrops total = drops_before_;
  total += drops_;
  v1::HandoffDrops* drops = s.mutable_handoff_drops();
  drops->set_bad_mac(total.bad_mac);
  drops->set_oversized(total.oversized);
  drops->set_malformed(total.malformed);
  drops->set_unexpected_microbatch(total.unexpected_microbatch);
  drops->set_unknown_peer(total.unknown_peer);
  drops->set_unknown_kind(total.unknown_kind);
  drops->set_bad_payload(total.bad_payload);
  drops->set_stale_epoch(total.stale_epoch);
  drops->set_incomplete(total.incomplete);
  s.set_handoff_in(handoff_in_);
  s.set_handoff_out(handoff_out_);
  s.set_max_descriptor_bytes(MaxDescriptorBytes(options_.group.kv.max_step_tokens));
  s.set_feeds_previous_token(true);  // fed_tokens.h
  s.set_dtype(options_.group.model.dtype == DType::kBF16 ? v1::DTYPE_BF16 : v1::DTYPE_F32);  // --dtype f32|bf16
  return s;
}

v1::StageStatus StageActor::Status() const {
  std::lock_guard<std::mutex> lock(mu_);
  return StatusLocked();
}

void StageActor::SetServing(bool serving) {
  if (options_.on_serving) options_.on_serving(serving);
}

void StageActor::Submit(v1::MicrobatchDescriptor descriptor, std::function<void(v1::MicrobatchResult)> done) {
  uint32_t rank = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    rank = config_.has_value() ? config_->pipeline_rank() : 0;
    if (accepting_) {
      ++in_flight_;
      // Its budget (MicrobatchDescriptor.budget_ms) counts from here.
      const absl::Time arrived = absl::Now();
      mailbox_.push_back([this, d = std::move(descriptor), done = std::move(done), rank, arrived] {
        bool abandon = false;
        std::string state;
        {
          std::lock_guard<std::mutex> lock(mu_);
          abandon = abandon_;
          state = v1::StageState_Name(state_) + (error_.empty() ? "" : ": " + error_);
        }
        if (unanswered_.count(d.microbatch_id()) != 0) {  // never from a sound coordinator
          {
            std::lock_guard<std::mutex> lock(mu_);
            --in_flight_;
          }
          return done(ErrorResult(
              d, absl::InvalidArgumentError(absl::StrCat("microbatch ", d.microbatch_id(), " is already in progress")),
              rank));
        }
        unanswered_[d.microbatch_id()] = done;
        if (abandon) {
          Deliver(ErrorResult(d, absl::CancelledError("abandoned by Shutdown before it ran"), rank));
        } else if (runner_ == nullptr) {
          Deliver(ErrorResult(d, absl::FailedPreconditionError(absl::StrCat("stage is not ready (", state, ")")),
                              rank));
        } else {
          ScopedLogFields requests({{"request_ids", RequestIdsOf(d)}});
          runner_->Run(d, arrived, [this](v1::MicrobatchResult r) { Deliver(std::move(r)); });
        }
      });
      changed_.notify_all();
      return;
    }
  }
  done(ErrorResult(descriptor,
                   absl::FailedPreconditionError("stage is draining or stopped; it takes no more microbatches"),
                   rank));
}

void StageActor::Deliver(v1::MicrobatchResult result) {
  auto it = unanswered_.find(result.microbatch_id());
  if (it == unanswered_.end()) return;
  std::function<void(v1::MicrobatchResult)> done = it->second;
  if (!result.more()) {
    unanswered_.erase(it);
    std::lock_guard<std::mutex> lock(mu_);
    --in_flight_;
    if (runner_ != nullptr) {
      last_sequence_number_ = runner_->last_sequence_number();
      kv_free_blocks_ = runner_->FreeBlocks();
      drops_ = runner_->drops();
      handoff_in_ = runner_->transport_in();
      handoff_out_ = runner_->transport_out();
    }
  }
  done(std::move(result));
}

void StageActor::AnswerUnanswered(const absl::Status& why) {
  uint32_t rank = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    rank = config_.has_value() ? config_->pipeline_rank() : 0;
  }
  while (!unanswered_.empty()) {
    v1::MicrobatchDescriptor d;
    d.set_microbatch_id(unanswered_.begin()->first);
    Deliver(ErrorResult(d, why, rank));
  }
}

void StageActor::Drain(bool abandon, std::function<void(v1::StageStatus)> done) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    accepting_ = false;
    if (abandon) abandon_ = interrupt_ = true;
    if (state_ != v1::STAGE_STATE_STOPPED) state_ = v1::STAGE_STATE_DRAINING;
  }
  SetServing(false);
  Post([this, done = std::move(done)] {
    AnswerUnanswered(absl::CancelledError("the stage drained before the wave of this microbatch was whole"));
    v1::StageStatus s;
    {
      std::lock_guard<std::mutex> lock(mu_);
      state_ = v1::STAGE_STATE_STOPPED;
      s = StatusLocked();
    }
    changed_.notify_all();
    done(s);
  });
}

bool StageActor::WaitStopped(absl::Time deadline) const {
  std::unique_lock<std::mutex> lock(mu_);
  while (state_ != v1::STAGE_STATE_STOPPED) {
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) return false;
    changed_.wait_for(lock, absl::ToChronoMilliseconds(left) + std::chrono::milliseconds(1));
  }
  return true;
}

}  // namespace seam::server
