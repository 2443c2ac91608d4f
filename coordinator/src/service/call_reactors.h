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
  // `text` (may be null) decodes each sequence's tokens into the responses' text.
  GenerateStreamReactor(std::string request_id, std::string server_request_id, const ModelText* text = nullptr,
                        int sequences = 0)
      : request_id_(std::move(request_id)),
        server_request_id_(std::move(server_request_id)),
        text_streams_(sequences, TextStream(text)) {}
  void OnToken(int sequence_index, int32_t token) override;
  void OnSequenceFinished(int sequence_index, FinishReason reason) override;
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
  std::vector<TextStream> text_streams_;  // per sequence
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
  // Exactly one of the two results is given; `text` (may be null) decodes
  // the completions once they are done.
  UnaryCallReactor(v1::GenerateResult* generate, v1::ScoreResult* score, size_t sequences,
                   const ModelText* text = nullptr);
  void OnToken(int sequence_index, int32_t token) override;
  void OnSequenceFinished(int sequence_index, FinishReason reason) override;
  void OnScore(int sequence_index, std::vector<float> token_logprobs) override;
  void OnDone(const absl::Status& status) override;
  bool Cancelled() const override { return cancelled_.load(); }

  void OnCancel() override { cancelled_.store(true); }
  void OnDone() override { delete this; }

 private:
  v1::GenerateResult* generate_;
  v1::ScoreResult* score_;
  const ModelText* text_;
  std::atomic<bool> cancelled_{false};
};

}  // namespace seam::coordinator
