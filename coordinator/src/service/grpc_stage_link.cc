// The gRPC Run stream behind GrpcStageLink: writes from the driver thread,
// reads on a dedicated thread (the synchronous stream allows one of each).
#include "service/grpc_stage_link.h"

#include <atomic>
#include <mutex>
#include <thread>

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"

namespace seam::coordinator {
namespace {

class GrpcStageLink final : public StageLink {
 public:
  GrpcStageLink(std::shared_ptr<v1::StageControl::Stub> stub, std::string address)
      : stub_(std::move(stub)), address_(std::move(address)) {}
  ~GrpcStageLink() override { Close(); }

  void Start(ResultCallback on_result, BrokenCallback on_broken) override {
    stream_ = stub_->Run(&context_);
    reader_ = std::thread([this, on_result = std::move(on_result), on_broken = std::move(on_broken)] {
      v1::MicrobatchResult result;
      while (stream_->Read(&result)) on_result(result);
      const grpc::Status status = stream_->Finish();
      if (closing_.load()) return;
      on_broken(absl::UnavailableError(absl::StrCat("Run stream to stage at ", address_, " ended: ",
                                                    status.ok() ? "closed by the stage" : status.error_message(),
                                                    status.ok() ? "" : absl::StrCat(" (grpc code ", status.error_code(), ")"))));
    });
  }

  absl::Status Send(const v1::MicrobatchDescriptor& descriptor) override {
    std::lock_guard<std::mutex> lock(write_mu_);
    if (stream_ == nullptr || writes_done_ || !stream_->Write(descriptor)) {
      return absl::UnavailableError(absl::StrCat("Run stream to stage at ", address_, " is closed"));
    }
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
    if (reader_.joinable()) reader_.join();
  }

  std::string address() const override { return address_; }

 private:
  std::shared_ptr<v1::StageControl::Stub> stub_;
  std::string address_;
  grpc::ClientContext context_;
  std::unique_ptr<grpc::ClientReaderWriter<v1::MicrobatchDescriptor, v1::MicrobatchResult>> stream_;
  std::thread reader_;
  std::mutex write_mu_;
  bool writes_done_ = false;
  std::atomic<bool> closing_{false};
};

}  // namespace

std::unique_ptr<StageLink> MakeGrpcStageLink(std::shared_ptr<v1::StageControl::Stub> stub, std::string address) {
  return std::make_unique<GrpcStageLink>(std::move(stub), std::move(address));
}

}  // namespace seam::coordinator
