// Running a call whose request did not parse (unparsable_requests.h).
#include "service/unparsable_requests.h"

namespace seam::coordinator::internal {
namespace {

// The handler runs the method's reactor getter on this thread, inside RunHandler.
thread_local bool unparsable = false;

}  // namespace

bool RequestUnparsable() { return unparsable; }

grpc::Status Unparsable(const std::string& message) {
  return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "the request bytes are not a " + message);
}

void UnparsableAware::RunHandler(const HandlerParameter& param) {
  if (param.status.ok()) return inner_->RunHandler(param);
  unparsable = true;
  inner_->RunHandler(HandlerParameter(param.call, param.server_context, param.request, grpc::Status::OK,
                                      param.internal_data, param.call_requester));
  unparsable = false;
}

}  // namespace seam::coordinator::internal
