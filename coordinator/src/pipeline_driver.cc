// PipelineDriver's thread and inbox: client threads and stage-link threads
// post closures; the driver thread runs them, then checks times and sends
// whatever the scheduler offers.
#include "pipeline_driver.h"

#include "absl/strings/str_cat.h"
#include "pipeline_driver_state.h"

namespace seam::coordinator {

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
  absl::StatusOr<std::unique_ptr<Scheduler>> scheduler = Scheduler::Create(options.scheduler);
  if (!scheduler.ok()) return scheduler.status();
  std::unique_ptr<PipelineDriver> driver(new PipelineDriver(options, std::move(*scheduler), std::move(links)));
  PipelineDriver* d = driver.get();
  for (size_t k = 0; k < d->links_.size(); ++k) {
    const int stage = static_cast<int>(k);
    d->links_[k]->Start(
        [d, stage](const v1::MicrobatchResult& r) { d->Post([d, stage, r] { d->state_->OnResult(stage, r); }); },
        [d, stage](const absl::Status& st) { d->Post([d, stage, st] { d->state_->OnBroken(stage, st); }); });
  }
  d->thread_ = std::thread([d] { d->Loop(); });
  return driver;
}

PipelineDriver::PipelineDriver(const PipelineDriverOptions& options, std::unique_ptr<Scheduler> scheduler,
                               std::vector<std::unique_ptr<StageLink>> links)
    : options_(options), links_(std::move(links)), stages_up_(links_.size(), true) {
  std::vector<StageLink*> raw;
  for (auto& l : links_) raw.push_back(l.get());
  epoch_ = scheduler->Epoch();
  state_ = std::make_unique<State>(options_, std::move(scheduler), std::move(raw), [this](int stage) {
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
    state_->Pump();
    std::lock_guard<std::mutex> lock(mu_);
    epoch_ = state_->Epoch();
  }
  state_->GoDown(absl::UnavailableError("the coordinator is shutting down"));
}

void PipelineDriver::Shutdown() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  cv_.notify_one();
  if (thread_.joinable()) thread_.join();
  for (auto& l : links_) l->Close();
}

std::vector<bool> PipelineDriver::StagesUp() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stages_up_;
}

uint64_t PipelineDriver::Epoch() const {
  std::lock_guard<std::mutex> lock(mu_);
  return epoch_;
}

}  // namespace seam::coordinator
