// load_transport.h over gRPC: one channel for every session, one streaming
// Generate call per request, each response stamped on arrival.
#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "grpc_client.h"
#include "in_flight_calls.h"
#include "load_transport.h"
#include "seam/v1/coordinator_service.grpc.pb.h"

namespace seam::cli {
namespace {

double Since(LoadClock::time_point t0) { return std::chrono::duration<double>(LoadClock::now() - t0).count(); }

using CallRegistry = InFlightCalls<grpc::ClientContext>;

class GrpcLoadClient final : public LoadClient {
 public:
  GrpcLoadClient(v1::Coordinator::Stub* stub, CallRegistry* registry) : stub_(stub), registry_(registry) {}

  absl::StatusOr<LoadAnswer> Send(const LoadRequest& request, LoadClock::time_point t0) override {
    v1::GenerateRequest call;
    call.set_request_id(request.id);
    call.add_prompts()->mutable_token_ids()->Add(request.prompt.begin(), request.prompt.end());
    call.mutable_sampling()->set_temperature(0);
    call.mutable_sampling()->set_max_new_tokens(static_cast<uint32_t>(request.max_tokens));
    std::unique_ptr<grpc::ClientContext> context = ContextWithTimeout(request.timeout_s);
    if (!registry_->Add(context.get())) return absl::CancelledError(absl::StrCat(request.id, ": cancelled"));
    LoadAnswer answer;
    auto reader = stub_->Generate(context.get(), call);
    v1::GenerateResponse r;
    while (reader->Read(&r)) {
      const double now = Since(t0);
      if (r.token_ids_size() == 0) continue;
      answer.arrivals.push_back(TokenArrival{now, r.token_ids_size()});
      answer.token_ids.insert(answer.token_ids.end(), r.token_ids().begin(), r.token_ids().end());
    }
    const grpc::Status status = reader->Finish();
    registry_->Remove(context.get());
    answer.end_seconds = Since(t0);
    if (!status.ok()) {
      return CallFailed(absl::StrCat(request.id, ": Generate failed: ", DescribeStatus(status)), status);
    }
    answer.output_tokens = static_cast<int64_t>(answer.token_ids.size());
    return answer;
  }

 private:
  v1::Coordinator::Stub* stub_;
  CallRegistry* registry_;
};

class GrpcLoadTransport final : public LoadTransport {
 public:
  explicit GrpcLoadTransport(std::shared_ptr<grpc::Channel> channel)
      : stub_(v1::Coordinator::NewStub(std::move(channel))),
        registry_([](grpc::ClientContext* call) { call->TryCancel(); }) {}
  std::string name() const override { return "grpc"; }
  std::unique_ptr<LoadClient> NewClient() override { return std::make_unique<GrpcLoadClient>(stub_.get(), &registry_); }
  void CancelAll() override { registry_.CancelAll(); }

 private:
  std::unique_ptr<v1::Coordinator::Stub> stub_;
  CallRegistry registry_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<LoadTransport>> MakeGrpcLoadTransport(const std::string& address,
                                                                    const security::ClientSecurityOptions& security) {
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel = security::MakeChannel(security, address);
  if (!channel.ok()) return channel.status();
  return std::unique_ptr<LoadTransport>(new GrpcLoadTransport(*channel));
}

}  // namespace seam::cli
