// HttpCall: the driver-to-worker hand-over of one HTTP generation call.
#include "http/http_call.h"

namespace seam::coordinator::http {

bool HttpCall::Progress::Empty() const {
  if (done) return false;
  for (const auto& t : new_tokens) {
    if (!t.empty()) return false;
  }
  for (const auto& f : finished) {
    if (f) return false;
  }
  for (const auto& t : new_text) {
    if (!t.empty()) return false;
  }
  return true;
}

HttpCall::HttpCall(int sequences) {
  pending_.new_tokens.resize(sequences);
  pending_.new_text.resize(sequences);
  pending_.new_logprobs.resize(sequences);
  pending_.finished.resize(sequences);
}

std::shared_ptr<HttpCall> HttpCall::Make(int sequences) {
  std::shared_ptr<HttpCall> call(new HttpCall(sequences));
  call->self_ = call;
  return call;
}

HttpCall::Progress HttpCall::Take(std::chrono::milliseconds wait) {
  std::unique_lock<std::mutex> lock(mu_);
  if (wait == std::chrono::milliseconds::max()) {
    cv_.wait(lock, [&] { return news_; });
  } else {
    cv_.wait_for(lock, wait, [&] { return news_; });
  }
  Progress out;
  out.new_tokens.resize(pending_.new_tokens.size());
  out.new_text.resize(pending_.new_text.size());
  out.new_logprobs.resize(pending_.new_logprobs.size());
  out.finished.resize(pending_.finished.size());
  std::swap(out.new_tokens, pending_.new_tokens);
  std::swap(out.new_text, pending_.new_text);
  std::swap(out.new_logprobs, pending_.new_logprobs);
  std::swap(out.finished, pending_.finished);
  out.done = pending_.done;
  out.status = pending_.status;
  news_ = false;
  return out;
}

void HttpCall::OnToken(int sequence_index, const TokenOutput& token) {
  std::lock_guard<std::mutex> lock(mu_);
  if (sequence_index < 0 || sequence_index >= static_cast<int>(pending_.new_tokens.size())) return;
  pending_.new_tokens[sequence_index].push_back(token.token);
  pending_.new_text[sequence_index] += token.text;
  if (token.logprobs != nullptr) pending_.new_logprobs[sequence_index].push_back(*token.logprobs);
  news_ = true;
  cv_.notify_all();
}

void HttpCall::OnSequenceFinished(int sequence_index, FinishReason reason, const std::string& text) {
  std::lock_guard<std::mutex> lock(mu_);
  if (sequence_index < 0 || sequence_index >= static_cast<int>(pending_.finished.size())) return;
  pending_.finished[sequence_index] = reason;
  pending_.new_text[sequence_index] += text;
  news_ = true;
  cv_.notify_all();
}

void HttpCall::OnDone(const absl::Status& status) {
  std::shared_ptr<HttpCall> keep;  // may be the last owner: released after the lock
  std::lock_guard<std::mutex> lock(mu_);
  pending_.done = true;
  pending_.status = status;
  news_ = true;
  cv_.notify_all();
  keep = std::move(self_);
}

}  // namespace seam::coordinator::http
