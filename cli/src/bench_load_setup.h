// What `seam bench load` decides before its first request: the parsed
// variants, load points and transports, the workload's options, the model's
// configuration and floor (runtime/step_floor.h), and the peaks measured on
// this machine (runtime/measured_peaks.h) that the ideal of each load point
// is computed from. Built once by the command; read-only afterwards.
#pragma once

#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "bench_load_command.h"
#include "load_ideal.h"
#include "load_runner.h"
#include "load_stats.h"
#include "load_workload.h"
#include "seam/runtime/measured_peaks.h"
#include "seam/runtime/step_floor.h"
#include "seam/weights/model_config.h"

namespace seam::cli {

// One set of extra process arguments measured on the same workload.
struct LoadVariant {
  std::string label;
  std::vector<std::string> stage_args, coordinator_args;
};

// "LABEL" or "LABEL:ARG ARG ..." (ARG: stage:--flag=value or
// coordinator:--flag=value). INVALID_ARGUMENT naming the text otherwise.
absl::StatusOr<LoadVariant> ParseLoadVariant(const std::string& text);

// --concurrency and --rates as load points, closed loop first (neither: one
// closed loop point at `sessions`). INVALID_ARGUMENT naming a bad entry.
absl::StatusOr<std::vector<LoadPoint>> ParseLoadPoints(const std::string& concurrency, const std::string& rates,
                                                       int sessions);

// `options` with --smoke's tiny model and workload filled in (unchanged without --smoke).
BenchLoadOptions WithSmokeDefaults(BenchLoadOptions options);

// The model directory to serve: --model, or a random qwen3 of the options'
// sizes written under `work` (empty for --addr without --model).
absl::StatusOr<std::string> PrepareModel(const BenchLoadOptions& options, const std::string& work);

class LoadSetup {
 public:
  // INVALID_ARGUMENT for bad flags. With --addr, asks the coordinator for
  // its vocabulary and layout (GetMetadata); --model must then be the
  // served checkpoint (its vocabulary is checked).
  static absl::StatusOr<LoadSetup> Make(const BenchLoadOptions& options, const std::string& model_dir);

  // Copy bandwidth and matmul peak on --device, before any pipeline runs;
  // on failure the ideal is left out and the reason kept for the report.
  void MeasurePeaks(const BenchLoadOptions& options, const Workload& workload, std::ostream& out);

  // The ideal of `workload` at `point` (absent without peaks or a model).
  std::optional<IdealLoad> Ideal(const Workload& workload, const LoadPoint& point, uint64_t arrival_seed) const;

  std::string Banner(const BenchLoadOptions& options, const Workload& workload) const;
  // Everything but the runs, for the JSON report.
  nlohmann::json Describe(const BenchLoadOptions& options, const Workload& workload,
                          const std::string& model_dir) const;
  std::string Notes() const;  // how to read the tables

  std::vector<LoadVariant> variants;
  std::vector<LoadPoint> points;
  std::vector<std::string> transports;
  WorkloadOptions workload;
  LatencyTarget target;
  std::string model_summary;  // "qwen3, 4 layers, hidden 512, f32, cpu"
  int pp = 1, tp = 1, attn_dp = 1;  // the flags', or the running server's (GetMetadata)

 private:
  std::optional<weights::ModelConfig> config_;  // absent: --addr without --model
  std::optional<runtime::StepFloor> floor_;
  IdealRates rates_;  // zero until measured
  runtime::MatmulShape gemm_shape_;
  struct ShapeRate {
    runtime::MatmulShape shape;
    double random = 0, constant = 0;  // FLOP/s; constant: GPU only (stated, never used), 0 elsewhere
  };
  std::vector<ShapeRate> shape_rates_;
  std::string peaks_source_;  // how the peaks were measured, or why not
};

}  // namespace seam::cli
