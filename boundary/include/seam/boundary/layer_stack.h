// LayerStack: the scope inside which decoder layers declare their stages.
// Opening one makes it the current stack of this thread; AppendStages adds
// stages in order and returns one boundary per stage. A stage binds (its plan
// is built) once its producer and consumer are known: on the next append, or
// when the stack closes; the last stage is terminal unless the stage-facts
// function names a later layer on another pipeline rank.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "seam/boundary/declaration.h"
#include "seam/boundary/layout.h"
#include "seam/boundary/reduction_policy.h"
#include "seam/boundary/stage_boundary.h"

namespace seam::boundary {

// Global layer index → the stages that layer declares, in order (empty for a
// layer that declares none). Derived from the config, the layer index and the
// fixed topology only, so every pipeline rank derives the same answer.
using StageFactsFn = std::function<std::vector<StageDeclaration>(int global_layer)>;

struct LayerStackOptions {
  Topology topology;
  ReductionPolicy policy = ReductionPolicy::kAr;  // resolved (never kAuto)
  StageFactsFn stage_facts;                       // required when first_layer > 0 or end_layer < total_layers
  int first_layer = 0;                            // first global layer built on this rank
  int end_layer = -1;                             // one past the last local layer (-1: the stack's end)
  int total_layers = -1;                          // layers of the whole stack (-1: = end_layer)
  // Capabilities of the final read, the last stage's consumer (e.g. a read
  // after the attention-TP gather keeps the last FFN off the slices). The
  // read itself runs through FinalNormOptions::read at forward time.
  ReadoutCaps final_read;
};

struct StageItem {
  StageDeclaration declaration;
  const NormParams* norm = nullptr;  // the consumer's norm (read at forward time)
  StageOptions options;
  // The stage's read of the residual (null: the plain add + RMSNorm over
  // `norm`). Its caps() must equal the declaration's readout_caps.
  std::shared_ptr<const ResidualReadout> read;
};

class LayerStack {
 public:
  explicit LayerStack(LayerStackOptions options);
  // Leaves the scope. Without a successful Close() the last stage is left
  // unbound (stage boundaries then refuse forwards), so call Close().
  ~LayerStack();
  LayerStack(const LayerStack&) = delete;
  LayerStack& operator=(const LayerStack&) = delete;

  // Binds the last stage and leaves the scope. Idempotent.
  absl::Status Close();
  // The innermost open stack of this thread, or nullptr.
  static LayerStack* Current();
  const LayerStackOptions& options() const { return options_; }
  int stage_count() const { return static_cast<int>(stages_.size()); }
  const std::vector<std::shared_ptr<StageBoundary>> boundaries() const;

  absl::StatusOr<std::vector<std::shared_ptr<StageBoundary>>> Append(std::vector<StageItem> items, int global_layer,
                                                                     const char* file, int line);

 private:
  struct Entry {
    std::shared_ptr<StageBoundary> boundary;
    int global_layer;
    std::string source;
  };
  absl::Status BindAt(size_t index, const NeighbourFacts& consumer);
  NeighbourFacts ProducerOf(size_t index) const;
  NeighbourFacts RemoteConsumer() const;
  // INVALID_ARGUMENT when this stack is a pipeline piece without stage_facts.
  absl::Status CheckPiece() const;

  LayerStackOptions options_;
  std::vector<Entry> stages_;
  LayerStack* previous_;
  int appends_ = 0;
  bool closed_ = false;
};

// Appends stages to the current stack (use SEAM_APPEND_STAGES for the source location).
absl::StatusOr<std::vector<std::shared_ptr<StageBoundary>>> AppendStagesAt(const char* file, int line,
                                                                           int global_layer,
                                                                           std::vector<StageItem> items);
#define SEAM_APPEND_STAGES(global_layer, ...) \
  ::seam::boundary::AppendStagesAt(__FILE__, __LINE__, (global_layer), {__VA_ARGS__})

}  // namespace seam::boundary
