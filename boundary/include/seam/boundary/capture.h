// Capture and auxiliary outputs: how a model keeps a copy of what a stage
// read (e.g. hidden states for a draft model) without disturbing the stream.
// A capture callback receives (value, owned). owned=false: the value may
// alias the mutable residual or a reusable communication buffer, so a
// collector must copy it before keeping it. owned=true only for storage
// nothing else writes: a capture whose move gathered rows, or a residual sum
// computed only for the capture. A capture is what the stage actually read,
// on the rows it names:
//   Prepare(capture)          the updated residual its read produced, on the
//                             residual's rows (the producer's rows); at stack
//                             entry, the input before init_residual. The owed
//                             sum completes unfused (the read still runs).
//   Prepare(capture_gathered) the same residual on the compute-input rows,
//                             after the input gather
//   CaptureOutput             the output's residual sum on a copy (see below)
//   FinalNorm(capture)        the final read's updated residual, always borrowed
// FFN prepare takes no capture. Captures need a plain update only where they
// snapshot (CaptureOutput); a finalize handoff is refused by a fused final norm.
#pragma once

#include <functional>
#include <vector>

#include "absl/status/statusor.h"
#include "seam/boundary/forward_batch.h"
#include "seam/boundary/residual_stream.h"
#include "seam/core/tensor.h"

namespace seam::boundary {

using CaptureFn = std::function<void(const Tensor& value, bool owned)>;

// Captures a stage's prepare may take (empty: none).
struct PrepareCapture {
  CaptureFn capture;
  CaptureFn capture_gathered;
  bool any() const { return capture != nullptr || capture_gathered != nullptr; }
};

// Keeps captured values in order: borrowed ones are copied, owned ones kept
// as they are. Not thread safe (one per rank).
class AuxCollector {
 public:
  CaptureFn capture();
  const std::vector<Tensor>& values() const { return values_; }
  int copies() const { return copies_; }
  int owned() const { return owned_; }

 private:
  std::vector<Tensor> values_;
  int copies_ = 0, owned_ = 0;
};

struct CapturedOutput {
  Hidden hidden;    // the value to pass on (its residual update still pending)
  Tensor snapshot;  // residual + completed contribution, owned by the caller
};
// A layer output's capture. Work the exit decided per batch (a sum a FFN or
// mixer left to the next input) is completed on the main contribution; a
// statically declared sum (an always-partial attention's) is summed on a
// copy and stays owed. Plain updates only ("snapshot requires a plain
// residual update"); a finalize handoff is refused as by Snapshot.
absl::StatusOr<CapturedOutput> CaptureOutput(const Hidden& hidden, ForwardBatch& batch);

}  // namespace seam::boundary
