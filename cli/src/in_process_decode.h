// The in-process baseline of `seam bench serve`: the same model decoding the
// same batches in this process on the same device, without gRPC, processes or
// handoffs. On the CPU (and on CUDA at TP > 1) a runtime::StageGroup at the
// served TP and attention DP; on CUDA at TP 1 the CUDA-graph decode
// (runtime::DecodeGraph) of one whole-stack model on GPU 0.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "seam/core/device.h"
#include "seam/core/dtype.h"

namespace seam::cli {

struct InProcessOptions {
  std::string model_dir;
  int tp = 1;
  int attn_dp = 1;
  Device::Kind device = Device::Kind::kCPU;
  DType dtype = DType::kF32;
  int prompt_len = 128;
  int new_tokens = 64;  // one from the prefill, then new_tokens - 1 decode steps
  int warmup = 1;       // untimed rounds of the same batch before the timed one
  int max_batch = 1;    // sizes the KV cache
};

struct InProcessFigures {
  double prefill_ms = 0;   // the whole batch's prefill
  double ms_per_step = 0;  // mean over the decode steps
  // batch x new_tokens / (prefill + decode time): the served tokens/s' definition.
  double tokens_per_s = 0;
};

class InProcessDecode {
 public:
  // Loads the model (CUDA at TP 1: a DecodeGraph per batch size, captured on
  // first use). FAILED_PRECONDITION when CUDA is asked for and this process
  // has no CUDA path or sees no GPU; errors of loading otherwise.
  static absl::StatusOr<std::unique_ptr<InProcessDecode>> Create(const InProcessOptions& options);
  virtual ~InProcessDecode() = default;

  // What runs, e.g. "StageGroup on cpu, TP 2, attention DP 1".
  virtual std::string Describe() const = 0;
  // `warmup` untimed rounds, then one timed round: `batch` sequences'
  // prefill, then greedy decode steps, then their KV blocks freed. The timed
  // round's prompts are the served timed round's (BenchPromptToken, round 0).
  virtual absl::StatusOr<InProcessFigures> Measure(int batch) = 0;
};

}  // namespace seam::cli
