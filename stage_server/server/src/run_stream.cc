// The Run stream reactor: descriptors in, answers out, in order.
#include "run_stream.h"

#include <utility>

namespace seam::server {

RunStream::RunStream(StageActor* actor) : actor_(actor) { StartRead(&incoming_); }

void RunStream::OnReadDone(bool ok) {
  if (!ok) {
    std::lock_guard<std::recursive_mutex> lock(mu_);
    reads_done_ = true;
    MaybeFinishLocked();
    return;
  }
  {
    std::lock_guard<std::recursive_mutex> lock(mu_);
    ++pending_;
  }
  v1::MicrobatchDescriptor descriptor = std::move(incoming_);
  incoming_.Clear();
  actor_->Submit(std::move(descriptor), [this](v1::MicrobatchResult result) { Deliver(std::move(result)); });
  StartRead(&incoming_);
}

void RunStream::Deliver(v1::MicrobatchResult result) {
  bool remove = false;
  {
    std::lock_guard<std::recursive_mutex> lock(mu_);
    if (!result.more()) --pending_;  // a descriptor's last answer
    if (done_) {
      remove = CanDeleteLocked();
    } else if (!finished_) {
      outgoing_.push_back(std::move(result));
      if (!writing_) {
        writing_ = true;
        StartWrite(&outgoing_.front());
      }
    }
  }
  if (remove) delete this;
}

void RunStream::OnWriteDone(bool ok) {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  outgoing_.pop_front();
  if (!ok) {
    // The client is gone. Answers still owed are dropped.
    outgoing_.clear();
    writing_ = false;
    MaybeFinishLocked();  // a cancelled call still needs Finish for OnDone
    return;
  }
  if (!outgoing_.empty()) {
    StartWrite(&outgoing_.front());
    return;
  }
  writing_ = false;
  MaybeFinishLocked();
}

void RunStream::MaybeFinishLocked() {
  if (reads_done_ && pending_ == 0 && !writing_ && !finished_ && !done_) {
    finished_ = true;
    Finish(grpc::Status::OK);
  }
}

void RunStream::OnDone() {
  bool remove = false;
  {
    std::lock_guard<std::recursive_mutex> lock(mu_);
    done_ = true;
    remove = CanDeleteLocked();
  }
  if (remove) delete this;
}

}  // namespace seam::server
