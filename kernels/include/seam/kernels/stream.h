// The CUDA stream kernels launch on, per calling thread. Each TP rank thread
// sets its stream once (ScopedStream); CPU code never needs it.
#pragma once

#include "absl/status/status.h"

namespace seam::kernels {

// Opaque cudaStream_t; nullptr is the legacy default stream.
using StreamHandle = void*;

StreamHandle CurrentStream();
void SetCurrentStream(StreamHandle stream);

// Sets the thread's stream for a scope and restores the previous one after.
class ScopedStream {
 public:
  explicit ScopedStream(StreamHandle stream) : previous_(CurrentStream()) { SetCurrentStream(stream); }
  ~ScopedStream() { SetCurrentStream(previous_); }
  ScopedStream(const ScopedStream&) = delete;
  ScopedStream& operator=(const ScopedStream&) = delete;

 private:
  StreamHandle previous_;
};

// Gives `stream` a matmul workspace of its own on the calling thread's
// current GPU. By default every stream of a thread shares one cuBLASLt
// workspace, which is safe only while one matmul runs at a time; a thread
// that keeps two streams busy at once (the two microbatches of a two-batch
// overlap) calls this for each first. Allocates once per (thread, device,
// stream), so call it before any graph capture. OK without effect in a build
// without CUDA.
absl::Status UseOwnMatmulWorkspace(StreamHandle stream);

}  // namespace seam::kernels
