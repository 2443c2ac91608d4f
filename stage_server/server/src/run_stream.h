// RunStream: the server side of one StageControl.Run stream. Each descriptor
// read goes to the stage actor's mailbox; answers come back on the actor
// thread and are written in the order they arrive (the actor's order), one
// write at a time. The stream finishes once the client has stopped sending
// and every descriptor has been answered. No reaction ever blocks.
#pragma once

#include <deque>
#include <mutex>

#include <grpcpp/grpcpp.h>

#include "seam/server/stage_actor.h"
#include "seam/v1/stage_service.pb.h"

namespace seam::server {

class RunStream final : public grpc::ServerBidiReactor<v1::MicrobatchDescriptor, v1::MicrobatchResult> {
 public:
  explicit RunStream(StageActor* actor);

  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override;
  void OnDone() override;

 private:
  // The actor's answer to one descriptor (actor thread).
  void Deliver(v1::MicrobatchResult result);
  // Finishes when reads are over and nothing is pending or being written.
  void MaybeFinishLocked();
  // Deletes this once gRPC is done with it and the actor owes no answer.
  bool CanDeleteLocked() const { return done_ && pending_ == 0; }

  StageActor* actor_;
  v1::MicrobatchDescriptor incoming_;

  // Recursive: gRPC may run OnWriteDone inline from StartWrite.
  std::recursive_mutex mu_;
  std::deque<v1::MicrobatchResult> outgoing_;  // front is being written while writing_
  int pending_ = 0;                            // submitted, not yet answered
  bool writing_ = false;
  bool reads_done_ = false;
  bool finished_ = false;
  bool done_ = false;
};

}  // namespace seam::server
