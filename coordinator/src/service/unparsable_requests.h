// Requests whose bytes are not the method's message. gRPC's callback
// handlers answer them UNIMPLEMENTED with an empty message, which tells a
// client nothing; the handlers made here answer INVALID_ARGUMENT naming the
// message the bytes should have been ("the request bytes are not a
// seam.v1.GenerateRequest"), and hand every other call to the method. The
// handler that parses is gRPC's own, wrapped: on a failed parse it runs the
// call with the refusal in place of the method.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>
#include <grpcpp/impl/codegen/server_callback_handlers.h>

namespace seam::coordinator {

namespace internal {

// True while gRPC runs a call whose request did not parse (set by UnparsableAware).
bool RequestUnparsable();

// Delegates to `inner`; a call whose request did not parse is run with an
// OK status while RequestUnparsable() is true.
class UnparsableAware final : public grpc::internal::MethodHandler {
 public:
  explicit UnparsableAware(std::unique_ptr<grpc::internal::MethodHandler> inner) : inner_(std::move(inner)) {}
  void RunHandler(const HandlerParameter& param) override;
  void* Deserialize(grpc_call* call, grpc_byte_buffer* req, grpc::Status* status, void** handler_data) override {
    return inner_->Deserialize(call, req, status, handler_data);
  }

 private:
  std::unique_ptr<grpc::internal::MethodHandler> inner_;
};

grpc::Status Unparsable(const std::string& message);

// A streamed answer that ends at once with `status`.
template <typename Response>
class RefusedWrite final : public grpc::ServerWriteReactor<Response> {
 public:
  explicit RefusedWrite(const grpc::Status& status) { this->Finish(status); }
  void OnDone() override { delete this; }
};

}  // namespace internal

// The handler of a unary method whose request is `message` (its full name).
template <typename Request, typename Response>
grpc::internal::MethodHandler* UnaryHandler(
    const std::string& message,
    std::function<grpc::ServerUnaryReactor*(grpc::CallbackServerContext*, const Request*, Response*)> method) {
  auto inner = std::make_unique<grpc::internal::CallbackUnaryHandler<Request, Response>>(
      [message, method](grpc::CallbackServerContext* context, const Request* request, Response* response) {
        if (!internal::RequestUnparsable()) return method(context, request, response);
        grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
        reactor->Finish(internal::Unparsable(message));
        return reactor;
      });
  return new internal::UnparsableAware(std::move(inner));
}

// The handler of a server-streaming method whose request is `message`.
template <typename Request, typename Response>
grpc::internal::MethodHandler* ServerStreamingHandler(
    const std::string& message,
    std::function<grpc::ServerWriteReactor<Response>*(grpc::CallbackServerContext*, const Request*)> method) {
  auto inner = std::make_unique<grpc::internal::CallbackServerStreamingHandler<Request, Response>>(
      [message, method](grpc::CallbackServerContext* context, const Request* request)
          -> grpc::ServerWriteReactor<Response>* {
        if (!internal::RequestUnparsable()) return method(context, request);
        return new internal::RefusedWrite<Response>(internal::Unparsable(message));
      });
  return new internal::UnparsableAware(std::move(inner));
}

}  // namespace seam::coordinator
