// The calling thread's current CUDA stream (an opaque handle; nullptr is the
// legacy default stream). Thread-local, so each TP rank thread has its own.
#include "seam/kernels/stream.h"

namespace seam::kernels {
namespace {
thread_local StreamHandle current_stream = nullptr;
}  // namespace

StreamHandle CurrentStream() { return current_stream; }
void SetCurrentStream(StreamHandle stream) { current_stream = stream; }

}  // namespace seam::kernels
