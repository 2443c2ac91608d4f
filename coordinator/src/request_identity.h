// Who a call is, and how its sequences are named. The coordinator gives every
// call a server request id ("req-" and 16 hex digits, NewServerRequestId);
// that id names the call everywhere past the front end: the driver's
// messages, the stages' descriptors and errors (SequenceEntry.
// server_request_id), every log line (request_id). The client's own id (the
// gRPC request_id, HTTP's X-Request-Id) only rides along into the
// coordinator's log lines (client_request_id) and the answer. A sequence is
// sequence `index` of its call (prompt p's choice j is p * n + j): the
// scheduler knows it by SequenceName, the stages by one uint64 sequence id
// for its whole life.
#pragma once

#include <string>

#include "absl/strings/str_cat.h"

namespace seam::coordinator {

struct RequestIdentity {
  std::string server_id;  // "req-" and 16 hex digits
  std::string client_id;  // the client's id, cut to the validated length; may be empty
};

// The scheduler's name of sequence `index` of the call: "req-<hex>/<index>".
inline std::string SequenceName(const RequestIdentity& call, int index) {
  return absl::StrCat(call.server_id, "/", index);
}

}  // namespace seam::coordinator
