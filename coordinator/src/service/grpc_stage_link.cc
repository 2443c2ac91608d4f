// The gRPC Run stream behind GrpcStageLink: writes from the driver thread,
// reads on a dedicated thread (the synchronous stream allows one of each),
// and a prober thread that calls GetStatus while results are owed.
#include "service/grpc_stage_link.h"

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"

namespace seam::coordinator {
namespace {

class GrpcStageLink final : public StageLink {
 public:
  GrpcStageLink(std::shared_ptr<v1::StageControl::Stub> stub, std::string address, StageLivenessOptions liveness)
      : stub_(std::move(stub)), address_(std::move(address)), liveness_(liveness) {}
  ~GrpcStageLink() override { Close(); }

  void Start(ResultCallback on_result, BrokenCallback on_broken) override {
    on_broken_ = std::move(on_broken);
    stream_ = stub_->Run(&context_);
    reader_ = std::thread([this, on_result = std::move(on_result)] {
      v1::MicrobatchResult result;
      while (stream_->Read(&result)) {
        {
          std::lock_guard<std::mutex> lock(probe_mu_);
          if (outstanding_ > 0 && !result.more()) --outstanding_;  // a descriptor's last answer
        }
        on_result(result);
      }
      const grpc::Status status = stream_->Finish();
      if (closing_.load()) return;
      ReportBroken(absl::UnavailableError(absl::StrCat(
          "Run stream to stage at ", address_, " ended: ", status.ok() ? "closed by the stage" : status.error_message(),
          status.ok() ? "" : absl::StrCat(" (grpc code ", status.error_code(), ")"))));
    });
    if (liveness_.misses > 0) prober_ = std::thread([this] { Probe(); });
  }

  absl::Status Send(const v1::MicrobatchDescriptor& descriptor) override {
    std::lock_guard<std::mutex> lock(write_mu_);
    if (stream_ == nullptr || writes_done_ || !stream_->Write(descriptor)) {
      return absl::UnavailableError(absl::StrCat("Run stream to stage at ", address_, " is closed"));
    }
    {
      std::lock_guard<std::mutex> probe_lock(probe_mu_);
      ++outstanding_;
    }
    probe_cv_.notify_all();
    return absl::OkStatus();
  }

  void Close() override {
    if (closing_.exchange(true)) return;
    if (stream_ != nullptr) {
      {
        std::lock_guard<std::mutex> lock(write_mu_);
        writes_done_ = true;
      }
      context_.TryCancel();
    }
    {
      std::lock_guard<std::mutex> lock(probe_mu_);
      if (probe_context_ != nullptr) probe_context_->TryCancel();
    }
    probe_cv_.notify_all();
    if (reader_.joinable()) reader_.join();
    if (prober_.joinable()) prober_.join();
  }

  std::string address() const override { return address_; }

 private:
  // Once, from whichever thread sees the end first; never after Close().
  void ReportBroken(const absl::Status& status) {
    if (closing_.load() || reported_.exchange(true)) return;
    on_broken_(status);
  }

  // While results are owed: GetStatus every interval, each with its own
  // deadline; `misses` failures in a row end the link.
  void Probe() {
    int missed = 0;
    std::string last_error;
    auto next = std::chrono::steady_clock::now();
    std::unique_lock<std::mutex> lock(probe_mu_);
    while (!closing_.load()) {
      if (outstanding_ == 0) {
        missed = 0;
        probe_cv_.wait(lock, [this] { return outstanding_ > 0 || closing_.load(); });
        next = std::chrono::steady_clock::now() + liveness_.interval;  // a fresh microbatch gets a whole interval
        continue;
      }
      if (probe_cv_.wait_until(lock, next, [this] { return closing_.load() || outstanding_ == 0; })) continue;
      next += liveness_.interval;
      grpc::ClientContext context;
      context.set_deadline(std::chrono::system_clock::now() + liveness_.timeout);
      probe_context_ = &context;
      lock.unlock();
      v1::StageStatus status;
      const grpc::Status s = stub_->GetStatus(&context, v1::GetStatusRequest(), &status);
      lock.lock();
      probe_context_ = nullptr;
      if (closing_.load()) break;
      if (s.ok()) {
        missed = 0;
        continue;
      }
      last_error = absl::StrCat(s.error_message(), " (grpc code ", s.error_code(), ")");
      if (++missed < liveness_.misses) continue;
      lock.unlock();
      ReportBroken(absl::UnavailableError(
          absl::StrCat("stage at ", address_, " missed ", missed, " liveness probes in a row (GetStatus every ",
                       liveness_.interval.count(), " ms, ", liveness_.timeout.count(), " ms deadline): ", last_error)));
      context_.TryCancel();  // the reader ends too; it reports nothing more
      return;
    }
  }

  std::shared_ptr<v1::StageControl::Stub> stub_;
  std::string address_;
  StageLivenessOptions liveness_;
  BrokenCallback on_broken_;
  grpc::ClientContext context_;
  std::unique_ptr<grpc::ClientReaderWriter<v1::MicrobatchDescriptor, v1::MicrobatchResult>> stream_;
  std::thread reader_;
  std::thread prober_;
  std::mutex write_mu_;
  bool writes_done_ = false;
  std::atomic<bool> closing_{false};
  std::atomic<bool> reported_{false};
  std::mutex probe_mu_;
  std::condition_variable probe_cv_;
  int64_t outstanding_ = 0;                       // descriptors sent, results not yet read
  grpc::ClientContext* probe_context_ = nullptr;  // the probe under way, cancelled by Close()
};

}  // namespace

std::unique_ptr<StageLink> MakeGrpcStageLink(std::shared_ptr<v1::StageControl::Stub> stub, std::string address,
                                             StageLivenessOptions liveness) {
  return std::make_unique<GrpcStageLink>(std::move(stub), std::move(address), liveness);
}

}  // namespace seam::coordinator
