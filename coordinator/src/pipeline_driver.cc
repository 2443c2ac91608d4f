// PipelineDriver's thread and inbox: client threads and stage-link threads
// post closures; the driver thread runs them, then checks times and sends
// whatever the scheduler offers.
#include "pipeline_driver.h"

#include <pthread.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "pipeline_driver_state.h"
#include "seam/core/logging.h"

namespace seam::coordinator {

std::chrono::milliseconds AnswerGrace(std::chrono::milliseconds stage_timeout) {
  return std::clamp(stage_timeout / 2, std::chrono::milliseconds(2000), std::chrono::milliseconds(5000));
}

absl::StatusOr<std::unique_ptr<PipelineDriver>> PipelineDriver::Create(
    const PipelineDriverOptions& options, std::vector<std::unique_ptr<StageLink>> links) {
  if (links.empty() || options.scheduler.pipeline_stages != static_cast<int>(links.size())) {
    return absl::InvalidArgumentError(absl::StrCat("scheduler.pipeline_stages is ", options.scheduler.pipeline_stages,
                                                   " but there are ", links.size(), " stage links"));
  }
  if (options.stage_timeout.count() <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("stage_timeout must be positive, got ", options.stage_timeout.count(), " ms"));
  }
  if (options.stage_timeout_per_token.count() < 0) {
    return absl::InvalidArgumentError(absl::StrCat("stage_timeout_per_token must not be negative, got ",
                                                   options.stage_timeout_per_token.count(), " ms"));
  }
  absl::StatusOr<std::unique_ptr<Scheduler>> scheduler = Scheduler::Create(options.scheduler);
  if (!scheduler.ok()) return scheduler.status();
  std::unique_ptr<PipelineDriver> driver(new PipelineDriver(options, std::move(*scheduler), std::move(links)));
  PipelineDriver* d = driver.get();
  d->StartLinks();
  d->thread_ = std::thread([d] {
    pthread_setname_np(pthread_self(), "driver");  // in top -H, perf
    d->Loop();
  });
  return driver;
}

void PipelineDriver::StartLinks() {
  const uint64_t gen = generation_;
  for (size_t k = 0; k < links_.size(); ++k) {
    const int stage = static_cast<int>(k);
    links_[k]->Start(
        [this, stage, gen](const v1::MicrobatchResult& r) {
          Post([this, stage, gen, r, read = State::Clock::now()] {
            if (gen == generation_) state_->OnResult(stage, r, read);
          });
        },
        [this, stage, gen](const absl::Status& st) {
          Post([this, stage, gen, st] {
            if (gen == generation_) state_->OnBroken(stage, st);
          });
        });
  }
}

void PipelineDriver::MaybeRecover() {
  if (!options_.reconnect || !state_->Down() || recovering_ || std::chrono::steady_clock::now() < next_recovery_) {
    return;
  }
  if (recovery_.joinable()) recovery_.join();  // the previous attempt already posted its outcome
  recovering_ = true;
  ++recovery_attempts_;
  attempt_started_ = std::chrono::steady_clock::now();
  const uint64_t epoch = state_->Epoch();
  recovery_ = std::thread([this, epoch] {
    auto links =
        std::make_shared<absl::StatusOr<std::vector<std::unique_ptr<StageLink>>>>(options_.reconnect(epoch));
    Post([this, links] { InstallLinks(std::move(*links)); });  // refused once stopping: the links just close
  });
}

void PipelineDriver::InstallLinks(absl::StatusOr<std::vector<std::unique_ptr<StageLink>>> links) {
  recovering_ = false;
  const auto now = std::chrono::steady_clock::now();
  next_recovery_ = now + options_.reconnect_interval;
  const auto seconds = [](std::chrono::steady_clock::duration d) { return std::chrono::duration<double>(d).count(); };
  // When the pipeline went down and what this attempt took: where a slow
  // recovery spent its time.
  const std::string timing = absl::StrFormat("%.3f s after it went down; attempt %d took %.3f s",
                                             seconds(now - down_since_), recovery_attempts_,
                                             seconds(now - attempt_started_));
  if (links.ok() && links->size() != links_.size()) {
    links = absl::InternalError(absl::StrCat("reconnect gave ", links->size(), " links for ", links_.size(), " stages"));
  }
  if (!links.ok()) {
    SEAM_LOG_WARN("pipeline still down (epoch {}, {}): {}", state_->Epoch(), timing, links.status().ToString());
    return;
  }
  for (auto& l : links_) l->Close();
  links_ = std::move(*links);
  ++generation_;
  StartLinks();
  std::vector<StageLink*> raw;
  for (auto& l : links_) raw.push_back(l.get());
  state_->Recover(std::move(raw));
  {
    std::lock_guard<std::mutex> lock(mu_);
    stages_up_.assign(links_.size(), true);
  }
  SEAM_LOG_INFO("pipeline back up: every stage reconfigured for epoch {} ({})", state_->Epoch(), timing);
  recovery_attempts_ = 0;
}

PipelineDriver::PipelineDriver(const PipelineDriverOptions& options, std::unique_ptr<Scheduler> scheduler,
                               std::vector<std::unique_ptr<StageLink>> links)
    : options_(options), links_(std::move(links)), stages_up_(links_.size(), true) {
  std::vector<StageLink*> raw;
  for (auto& l : links_) raw.push_back(l.get());
  epoch_ = scheduler->Epoch();
  delivery_ = std::make_unique<CallDelivery>(options_.delivery_threads >= 0
                                                 ? options_.delivery_threads
                                                 : CallDelivery::DefaultLanes(std::thread::hardware_concurrency()));
  state_ = std::make_unique<State>(options_, std::move(scheduler), std::move(raw), delivery_.get(), [this](int stage) {
    std::lock_guard<std::mutex> lock(mu_);
    stages_up_[stage] = false;
  });
}

PipelineDriver::~PipelineDriver() { Shutdown(); }

bool PipelineDriver::Post(std::function<void()> message) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return false;
    inbox_.push_back(std::move(message));
  }
  cv_.notify_one();
  return true;
}

void PipelineDriver::Submit(DriverCall call) {
  CallObserver* observer = call.observer;
  auto shared = std::make_shared<DriverCall>(std::move(call));
  if (!Post([this, shared] { state_->Admit(std::move(*shared)); })) {
    observer->OnDone(absl::UnavailableError("the coordinator is shutting down"));
  }
}

void PipelineDriver::Loop() {
  for (;;) {
    std::deque<std::function<void()>> messages;
    bool stop = false;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait_for(lock, options_.tick, [this] { return !inbox_.empty() || stopping_; });
      messages.swap(inbox_);
      stop = stopping_;
    }
    for (auto& m : messages) m();
    if (stop) break;
    state_->CheckTimes(State::Clock::now());
    delivery_->Flush();  // the answers' tokens go out while the next microbatch is built
    state_->Pump();
    delivery_->Flush();
    MaybeRecover();
    if (state_->Down() != reported_down_) {
      reported_down_ = state_->Down();
      if (reported_down_) {
        down_since_ = std::chrono::steady_clock::now();
        SEAM_LOG_WARN("pipeline down (epoch {}): {}", state_->Epoch(), state_->DownStatus().ToString());
      }
      if (options_.on_pipeline_up) options_.on_pipeline_up(!reported_down_);
    }
    const Load load = state_->CurrentLoad();
    std::lock_guard<std::mutex> lock(mu_);
    epoch_ = state_->Epoch();
    load_ = load;
  }
  state_->GoDown(absl::UnavailableError("the coordinator is shutting down"));
  delivery_->Drain();  // every call's OnDone has run
  const PrefixCacheStats prefix = state_->CurrentLoad().prefix;
  if (prefix.queries > 0) {
    SEAM_LOG_INFO("prefix cache: {} prompts looked up, {} of {} prompt tokens hit, {} blocks evicted, {} waited for "
                  "blocks in flight",
                  prefix.queries, prefix.hit_tokens, prefix.query_tokens, prefix.evictions, prefix.waited_requests);
  }
}

void PipelineDriver::Shutdown() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  cv_.notify_one();
  if (thread_.joinable()) thread_.join();
  if (recovery_.joinable()) recovery_.join();
  for (auto& l : links_) l->Close();
}

std::vector<bool> PipelineDriver::StagesUp() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stages_up_;
}

void PipelineDriver::ObserveMicrobatches(std::function<void(int64_t tokens)> sent) {
  Post([this, sent = std::move(sent)] { state_->microbatch_sent = sent; });
}

// The scheduler's load, for metrics (driver thread).
PipelineDriver::Load PipelineDriver::State::CurrentLoad() const {
  PipelineDriver::Load load;
  load.running = scheduler->RunningCount();
  load.waiting = scheduler->QueueDepth();
  load.preemptions = scheduler->PreemptionCount();
  const SchedulerOptions& o = scheduler->options();
  int64_t total = 0, free = 0;
  for (int dp = 0; dp < o.dp_groups; ++dp) {
    total += o.kv_blocks_per_dp_group;
    free += scheduler->FreeBlocks(dp) + scheduler->EvictableBlocks(dp);  // cached blocks no one maps are free to take
  }
  load.kv_usage = total > 0 ? static_cast<double>(total - free) / static_cast<double>(total) : 0.0;
  load.prefix = scheduler->PrefixStats();
  load.step_budget = scheduler->StepBudget();
  return load;
}

PipelineDriver::Load PipelineDriver::CurrentLoad() const {
  std::lock_guard<std::mutex> lock(mu_);
  return load_;
}

uint64_t PipelineDriver::Epoch() const {
  std::lock_guard<std::mutex> lock(mu_);
  return epoch_;
}

}  // namespace seam::coordinator
