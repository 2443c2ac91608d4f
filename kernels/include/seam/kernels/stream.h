// The CUDA stream kernels launch on, per calling thread. Each TP rank thread
// sets its stream once (ScopedStream); CPU code never needs it.
#pragma once

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

}  // namespace seam::kernels
