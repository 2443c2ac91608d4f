// FedSlots: where one CUDA rank keeps the chosen tokens of its decode steps
// fed on the device (StageGroup::StepFed): a ring of slots, each with the
// step's tokens on the device (which a later step feeds), their pinned host
// copy, the step's sampling steps staged for upload, and the point on the
// rank's stream after the copy to the host. A slot is taken again
// kFedSlots steps later; its generation tells a stale ticket from the
// current one. Owned by the rank's state, used on its thread (its events
// may be waited for from any thread). Internal to seam_runtime.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "seam/core/cuda_graph.h"
#include "seam/core/status.h"
#include "seam/core/tensor.h"

namespace seam::runtime::internal {

struct FedSlots {
  static constexpr int64_t kFedSlots = 64;

  // Slots of up to `rows` tokens on `device` (the rank's stream current).
  static absl::StatusOr<std::unique_ptr<FedSlots>> Create(Device device, int64_t rows) {
    auto f = std::make_unique<FedSlots>();
    f->rows = rows;
    SEAM_ASSIGN_OR_RETURN(f->tokens, Tensor::TryEmpty({kFedSlots, rows}, DType::kI32, device));
    SEAM_ASSIGN_OR_RETURN(f->steps, Tensor::TryEmpty({kFedSlots, rows}, DType::kI32, device));
    SEAM_ASSIGN_OR_RETURN(f->host_tokens, PinnedBuffer::Create(kFedSlots * rows * sizeof(int32_t)));
    SEAM_ASSIGN_OR_RETURN(f->host_steps, PinnedBuffer::Create(kFedSlots * rows * sizeof(int32_t)));
    for (int64_t s = 0; s < kFedSlots; ++s) {
      SEAM_ASSIGN_OR_RETURN(CudaEvent e, CudaEvent::Create(device));
      f->done.push_back(std::move(e));
    }
    f->sequences.resize(kFedSlots);
    f->generation.assign(kFedSlots, 0);
    return f;
  }

  // Slot s's first n tokens on the device, and their host copy.
  Tensor DeviceTokens(int64_t s, int64_t n) const { return tokens.Rows(s, 1).Reshape({rows}).value().Rows(0, n); }
  int32_t* HostTokens(int64_t s) const { return static_cast<int32_t*>(host_tokens.data()) + s * rows; }
  int32_t* HostSteps(int64_t s) const { return static_cast<int32_t*>(host_steps.data()) + s * rows; }

  int64_t rows = 0;
  Tensor tokens, steps;  // i32 [kFedSlots, rows] on the device
  PinnedBuffer host_tokens, host_steps;
  std::vector<CudaEvent> done;                   // after the slot's copy to the host
  std::vector<std::vector<uint64_t>> sequences;  // the sequences of the slot's step, in order
  std::vector<uint64_t> generation;              // the step that holds the slot now
  uint64_t next = 0;                             // fed steps so far (the next step's generation - 1)
};

}  // namespace seam::runtime::internal
