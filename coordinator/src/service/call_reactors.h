// The reactors behind CoordinatorService's calls. Each is also the call's
// CallObserver: the driver reports into it, it writes to the client. gRPC
// deletes a reactor in OnDone, which comes only after Finish, which comes
// only after the driver's OnDone, so the driver never sees a dead observer.
#pragma once

#include <atomic>
#include <deque>
#include <mutex>

#include <grpcpp/grpcpp.h>

#include "pipeline_driver.h"
#include "service/model_text.h"
#include "seam/v1/coordinator_service.pb.h"

namespace seam::coordinator {

// Generate: one GenerateResponse per batch of new tokens of a sequence.
class GenerateStreamReactor final : public grpc::ServerWriteReactor<v1::GenerateResponse>, public CallObserver {
 public:
  // The responses carry the text and log-probs the driver gives with each token.
  GenerateStreamReactor(std::string request_id, std::string server_request_id)
      : request_id_(std::move(request_id)), server_request_id_(std::move(server_request_id)) {}
  void OnToken(int sequence_index, const TokenOutput& token) override;
  void OnSequenceFinished(int sequence_index, FinishReason reason, const std::string& text) override;
  void OnScore(int, std::vector<float>) override {}
  void OnDone(const absl::Status& status) override;
  bool Cancelled() const override { return cancelled_.load(); }

  void OnWriteDone(bool ok) override;
  void OnCancel() override { cancelled_.store(true); }
  void OnDone() override { delete this; }

 private:
  void WriteNextLocked();  // mu_ held
  std::string request_id_;
  std::string server_request_id_;
  std::mutex mu_;
  std::deque<v1::GenerateResponse> queue_;
  bool writing_ = false;
  bool finished_ = false;
  bool done_ = false;
  grpc::Status final_;
  v1::GenerateResponse current_;
  std::atomic<bool> cancelled_{false};
};

// GenerateAll and Score: one answer once every sequence is done.
class UnaryCallReactor final : public grpc::ServerUnaryReactor, public CallObserver {
 public:
  // Exactly one of the two results is given; a completion's text and
  // log-probs are the driver's, token by token.
  UnaryCallReactor(v1::GenerateResult* generate, v1::ScoreResult* score, size_t sequences);
  void OnToken(int sequence_index, const TokenOutput& token) override;
  void OnSequenceFinished(int sequence_index, FinishReason reason, const std::string& text) override;
  void OnScore(int sequence_index, std::vector<float> token_logprobs) override;
  void OnDone(const absl::Status& status) override;
  bool Cancelled() const override { return cancelled_.load(); }

  void OnCancel() override { cancelled_.store(true); }
  void OnDone() override { delete this; }

 private:
  v1::GenerateResult* generate_;
  v1::ScoreResult* score_;
  std::atomic<bool> cancelled_{false};
};

}  // namespace seam::coordinator
