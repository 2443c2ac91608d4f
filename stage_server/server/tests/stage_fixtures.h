// Shared pieces of the stage server tests: the tiny random checkpoint, stage
// configs, descriptors, a step-by-step Run client and the in-process
// reference tokens they are compared with.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"
#include "seam/runtime/stage_group.h"
#include "seam/v1/stage_service.grpc.pb.h"
#include "stage_process.h"

namespace seam::server::testing {

inline constexpr uint64_t kEpoch = 7;

// The random checkpoint of seam::testing::TinyConfig(false) (seed 21), written
// once per test process.
const std::string& CheckpointDir();

// The whole model as one stage (pipeline_size 1, TP 1) at kEpoch.
v1::StageConfig SingleStage();
v1::MicrobatchDescriptor Descriptor(uint64_t id, uint64_t sequence_number);
// Appends a greedy sequence entry.
void AddSequence(v1::MicrobatchDescriptor& d, uint64_t sequence, const std::vector<int32_t>& tokens, uint64_t start,
                 bool prefill);

v1::StageStatus Configure(StageProcess& stage, const v1::StageConfig& config, grpc::Status* status);
v1::StageStatus GetStatus(StageProcess& stage);
std::vector<int32_t> SampledTokens(const v1::MicrobatchResult& r);
// Greedy tokens of one whole-model step on an in-process StageGroup.
std::vector<int32_t> ReferenceArgmax(runtime::StageGroup& group, const std::vector<models::SequenceStep>& steps);
// The result is an error with `code` whose message contains `field`.
void ExpectError(const v1::MicrobatchResult& r, absl::StatusCode code, const std::string& field);

// One Run stream driven by hand.
class RunClient {
 public:
  explicit RunClient(StageProcess& stage) : context_(Context()), stream_(stage.stub().Run(context_.get())) {}
  bool Write(const v1::MicrobatchDescriptor& d) { return stream_->Write(d); }
  v1::MicrobatchResult Read();
  // Write, then read the answer.
  v1::MicrobatchResult Exchange(const v1::MicrobatchDescriptor& d);
  grpc::Status Close();

 private:
  std::unique_ptr<grpc::ClientContext> context_;
  std::unique_ptr<grpc::ClientReaderWriter<v1::MicrobatchDescriptor, v1::MicrobatchResult>> stream_;
};

}  // namespace seam::server::testing
