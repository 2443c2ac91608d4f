// Bringing up the pipeline from the coordinator: wait for each stage's gRPC,
// read its worker address, split the layers, Configure every stage with its
// neighbours' addresses, and wait until all of them are READY.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <grpcpp/security/credentials.h>
#include <grpcpp/support/channel_arguments.h>

#include "absl/status/statusor.h"
#include "seam/v1/stage_service.grpc.pb.h"

namespace seam::coordinator {

struct StageEndpoint {
  std::string address;  // host:port
  std::shared_ptr<v1::StageControl::Stub> stub;
  v1::StageStatus status;  // last seen
};

// Inclusive [first, last] layer ranges, one per stage. `spec` empty: an even
// split (earlier stages take the remainder); otherwise "0-13,14-27", which
// must cover 0..num_layers-1 in order without gaps. INVALID_ARGUMENT naming
// the bad range.
absl::StatusOr<std::vector<std::pair<int, int>>> SplitLayers(int num_layers, int stages, const std::string& spec);

// The arguments of every channel from the coordinator to a stage: gRPC's
// reconnect backoff bounded to kStageReconnectBackoffMs first and
// kStageMaxReconnectBackoffMs at most (gRPC's defaults: 1 s, growing x1.6
// to 120 s). Channels to one address share one gRPC subchannel, and with it
// its backoff, across the driver's reconnect attempts; unbounded, a stage
// restarted 6 s into an outage was reached only at gRPC's next scheduled
// connect, about 9.3 s in, and later ones waited longer still.
inline constexpr int kStageReconnectBackoffMs = 100;
inline constexpr int kStageMaxReconnectBackoffMs = 1000;
grpc::ChannelArguments StageChannelArguments();

// Waits (up to `wait`) for every stage's GetStatus to answer, over channels
// made with `credentials` (TLS with the coordinator's client certificate, or
// plaintext) and StageChannelArguments(). UNAVAILABLE naming the stage that
// never answered.
absl::StatusOr<std::vector<StageEndpoint>> ConnectStages(const std::vector<std::string>& addresses,
                                                         std::chrono::milliseconds wait,
                                                         const std::shared_ptr<grpc::ChannelCredentials>& credentials);

struct PipelineLayout {
  std::string model_dir;
  int tp = 1;
  int attn_dp = 1;
  uint64_t epoch = 0;
  std::vector<std::pair<int, int>> layers;  // per stage
};

// The epoch a coordinator starts at with these (just connected) stages: 0
// for fresh ones, else one past the latest epoch any of them was configured
// for, so that every stage reloads. Logs what it adopts.
uint64_t AdoptionEpoch(const std::vector<StageEndpoint>& stages);

// The handoff key of one epoch: kHandoffKeyBytes from OpenSSL's RAND_bytes.
// INTERNAL when OpenSSL cannot give them.
inline constexpr size_t kHandoffKeyBytes = 32;
absl::StatusOr<std::string> NewHandoffKey();

// Configures all stages at once, with a fresh handoff key for the epoch (neighbours connect to each other while
// loading), then waits for READY. FAILED_PRECONDITION with the stage's error
// when one fails; DEADLINE_EXCEEDED when one is not READY within `wait`.
absl::Status ConfigureStages(std::vector<StageEndpoint>& stages, const PipelineLayout& layout,
                             std::chrono::milliseconds wait);

}  // namespace seam::coordinator
