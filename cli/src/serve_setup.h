// What `seam serve` decides before it starts a process: every flag checked
// (the message names the flag), MODEL found to be a local checkpoint, the
// device and dtype chosen (auto: the visible GPUs, the checkpoint's dtype),
// and the LocalPipelineOptions that `run` and `bench` also start from.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "local_pipeline.h"
#include "serve_command.h"

namespace seam::cli {

// The flags alone: ranges, the loopback rule, the token's source.
// INVALID_ARGUMENT naming the flag.
absl::Status CheckServeFlags(const ServeCommandOptions& o);

// MODEL as a local checkpoint folder holding config.json. INVALID_ARGUMENT:
// no such folder (a hub id gets "seam loads local checkpoints only"), or
// its config.json is missing or unreadable (named).
absl::Status CheckModelDir(const std::string& model_dir);

struct ServePlan {
  LocalPipelineOptions pipeline;
  std::string device;      // cpu | cuda
  std::string dtype;       // f32 | bf16
  std::string model_name;  // the HTTP API's name of the model
  int gpus = 0;            // visible GPUs
};

// The pipeline `o` asks for, serving `model_dir` (checked) with its work
// files in `work`. INVALID_ARGUMENT naming the flag (--device cuda without
// GPUs, --tp above them, --api-key-file unreadable, ...).
absl::StatusOr<ServePlan> PlanServe(const ServeCommandOptions& o, const std::string& model_dir,
                                    const std::string& work);

}  // namespace seam::cli
