// StageLink: the coordinator's end of one stage's Run stream. The driver sends
// descriptors in order and gets each result (or the stream's end) through
// callbacks; the gRPC link is in grpc_stage_link.h, tests use a fake.
#pragma once

#include <functional>
#include <string>

#include "absl/status/status.h"
#include "seam/v1/stage_service.pb.h"

namespace seam::coordinator {

class StageLink {
 public:
  using ResultCallback = std::function<void(const v1::MicrobatchResult&)>;
  // Called once when the stream ends for any reason other than Close().
  using BrokenCallback = std::function<void(const absl::Status&)>;

  virtual ~StageLink() = default;
  // Starts delivering results; callbacks run on the link's own thread, in
  // stream order, and never after Close() returns.
  virtual void Start(ResultCallback on_result, BrokenCallback on_broken) = 0;
  // Queues one descriptor on the stream. UNAVAILABLE when the stream is gone.
  virtual absl::Status Send(const v1::MicrobatchDescriptor& descriptor) = 0;
  // Ends the stream and waits for the receiving thread. Idempotent.
  virtual void Close() = 0;
  // host:port of the stage, for messages.
  virtual std::string address() const = 0;
};

}  // namespace seam::coordinator
