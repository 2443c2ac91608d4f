// Call reactors: turning driver callbacks into gRPC writes and answers.
#include "service/call_reactors.h"

#include "service/coordinator_service.h"

namespace seam::coordinator {

void GenerateStreamReactor::OnToken(int sequence_index, const TokenOutput& token) {
  std::lock_guard<std::mutex> lock(mu_);
  // Tokens of a sequence not yet on the wire join its queued response.
  if (queue_.empty() || queue_.back().sequence_index() != static_cast<uint32_t>(sequence_index) ||
      queue_.back().finish_reason() != v1::FINISH_REASON_UNSPECIFIED) {
    v1::GenerateResponse r;
    r.set_request_id(request_id_);
    r.set_server_request_id(server_request_id_);
    r.set_sequence_index(sequence_index);
    queue_.push_back(std::move(r));
  }
  v1::GenerateResponse& r = queue_.back();
  r.add_token_ids(token.token);
  r.mutable_text()->append(token.text);
  if (token.logprobs != nullptr) *r.add_logprobs() = *token.logprobs;
  WriteNextLocked();
}

void GenerateStreamReactor::OnSequenceFinished(int sequence_index, FinishReason reason, const std::string& text) {
  std::lock_guard<std::mutex> lock(mu_);
  if (queue_.empty() || queue_.back().sequence_index() != static_cast<uint32_t>(sequence_index) ||
      queue_.back().finish_reason() != v1::FINISH_REASON_UNSPECIFIED) {
    v1::GenerateResponse r;
    r.set_request_id(request_id_);
    r.set_server_request_id(server_request_id_);
    r.set_sequence_index(sequence_index);
    queue_.push_back(std::move(r));
  }
  queue_.back().set_finish_reason(ToProto(reason));
  queue_.back().mutable_text()->append(text);
  WriteNextLocked();
}

void GenerateStreamReactor::OnDone(const absl::Status& status) {
  std::lock_guard<std::mutex> lock(mu_);
  done_ = true;
  final_ = ToGrpc(status);
  if (!status.ok()) queue_.clear();  // the status says it all; stop writing
  WriteNextLocked();
}

void GenerateStreamReactor::OnWriteDone(bool ok) {
  std::lock_guard<std::mutex> lock(mu_);
  writing_ = false;
  if (!ok) queue_.clear();  // the client is gone; finish once the driver is done
  WriteNextLocked();
}

void GenerateStreamReactor::WriteNextLocked() {
  if (writing_ || finished_) return;
  if (!queue_.empty()) {
    current_ = std::move(queue_.front());
    queue_.pop_front();
    writing_ = true;
    StartWrite(&current_);
    return;
  }
  if (done_) {
    finished_ = true;
    Finish(final_);
  }
}

UnaryCallReactor::UnaryCallReactor(v1::GenerateResult* generate, v1::ScoreResult* score, size_t sequences)
    : generate_(generate), score_(score) {
  for (size_t i = 0; i < sequences; ++i) {
    if (generate_ != nullptr) generate_->add_completions();
    if (score_ != nullptr) score_->add_scores();
  }
}

void UnaryCallReactor::OnToken(int sequence_index, const TokenOutput& token) {
  v1::Completion* c = generate_->mutable_completions(sequence_index);
  c->add_token_ids(token.token);
  c->mutable_text()->append(token.text);
  if (token.logprobs != nullptr) *c->add_logprobs() = *token.logprobs;
}

void UnaryCallReactor::OnSequenceFinished(int sequence_index, FinishReason reason, const std::string& text) {
  v1::Completion* c = generate_->mutable_completions(sequence_index);
  c->set_finish_reason(ToProto(reason));
  c->mutable_text()->append(text);
}

void UnaryCallReactor::OnScore(int sequence_index, std::vector<float> token_logprobs) {
  v1::SequenceScore* s = score_->mutable_scores(sequence_index);
  double total = 0;
  for (float lp : token_logprobs) {
    s->add_token_logprobs(lp);
    total += lp;
  }
  s->set_total_logprob(total);
}

void UnaryCallReactor::OnDone(const absl::Status& status) { Finish(ToGrpc(status)); }

}  // namespace seam::coordinator
