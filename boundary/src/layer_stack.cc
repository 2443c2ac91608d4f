#include "seam/boundary/layer_stack.h"

#include "absl/strings/str_cat.h"
#include "seam/boundary/boundary_errors.h"
#include "seam/boundary/plan.h"
#include "seam/core/status.h"

namespace seam::boundary {
namespace {
thread_local LayerStack* current_stack = nullptr;

bool SameCaps(const ReadoutCaps& a, const ReadoutCaps& b) {
  return a.reads_before_dp_gather == b.reads_before_dp_gather &&
         a.reads_after_attn_tp_gather == b.reads_after_attn_tp_gather && a.add_norm == b.add_norm &&
         a.completing_fusions == b.completing_fusions && a.gathering_reads == b.gathering_reads;
}

const char* BaseName(const char* path) {
  const char* base = path;
  for (const char* p = path; *p != '\0'; ++p) {
    if (*p == '/') base = p + 1;
  }
  return base;
}
}  // namespace

LayerStack::LayerStack(LayerStackOptions options) : options_(std::move(options)), previous_(current_stack) {
  if (options_.total_layers < 0) options_.total_layers = options_.end_layer;
  current_stack = this;
}

LayerStack::~LayerStack() {
  // A stack left without Close() (construction returned early on an error)
  // still leaves the scope; its last stage stays unbound, so any forward
  // through it fails with a clear error instead of running unbound.
  if (!closed_) {
    closed_ = true;
    if (current_stack == this) current_stack = previous_;
  }
}

LayerStack* LayerStack::Current() { return current_stack; }

const std::vector<std::shared_ptr<StageBoundary>> LayerStack::boundaries() const {
  std::vector<std::shared_ptr<StageBoundary>> out;
  for (const Entry& e : stages_) out.push_back(e.boundary);
  return out;
}

NeighbourFacts LayerStack::ProducerOf(size_t index) const {
  if (index > 0) return NeighbourFacts{true, stages_[index - 1].boundary->declaration()};
  if (!options_.stage_facts) return NeighbourFacts{};
  for (int layer = options_.first_layer - 1; layer >= 0; --layer) {
    std::vector<StageDeclaration> facts = options_.stage_facts(layer);
    if (!facts.empty()) return NeighbourFacts{true, facts.back()};
  }
  return NeighbourFacts{};
}

NeighbourFacts LayerStack::RemoteConsumer() const {
  if (!options_.stage_facts || options_.end_layer < 0) return NeighbourFacts{};
  for (int layer = options_.end_layer; layer < options_.total_layers; ++layer) {
    std::vector<StageDeclaration> facts = options_.stage_facts(layer);
    if (!facts.empty()) return NeighbourFacts{true, facts.front()};
  }
  return NeighbourFacts{};
}

absl::Status LayerStack::BindAt(size_t index, const NeighbourFacts& consumer) {
  Entry& e = stages_[index];
  const NeighbourFacts producer = ProducerOf(index);
  StagePlace place;
  place.bound = true;
  place.index = static_cast<int>(index);
  place.global_layer = e.global_layer;
  place.terminal = !consumer.exists;
  place.has_producer = producer.exists;
  if (producer.exists) place.producer_kind = producer.declaration.kind;
  place.consumer_is_mixer = consumer.exists && consumer.declaration.is_mixer();
  place.source = e.source;
  auto plan = BuildStagePlan(e.boundary->declaration(), producer, consumer, options_.topology, options_.policy);
  if (!plan.ok()) {
    return absl::Status(plan.status().code(),
                        absl::StrCat(plan.status().message(), " [while binding the stage from ", e.source, "]"));
  }
  e.boundary->Bind(std::make_unique<StagePlan>(*std::move(plan)), place);
  return absl::OkStatus();
}

absl::Status LayerStack::CheckPiece() const {
  const bool piece = options_.first_layer > 0 || (options_.end_layer >= 0 && options_.end_layer < options_.total_layers);
  if (piece && !options_.stage_facts) {
    return errors::PipelinePieceWithoutStageFacts(options_.first_layer, options_.end_layer, options_.total_layers);
  }
  return absl::OkStatus();
}

absl::Status LayerStack::Close() {
  if (closed_) return absl::OkStatus();
  closed_ = true;
  if (current_stack == this) current_stack = previous_;
  SEAM_RETURN_IF_ERROR(CheckPiece());
  if (stages_.empty()) return absl::OkStatus();
  NeighbourFacts consumer = RemoteConsumer();
  consumer.final_read = options_.final_read;
  return BindAt(stages_.size() - 1, consumer);
}

absl::StatusOr<std::vector<std::shared_ptr<StageBoundary>>> LayerStack::Append(std::vector<StageItem> items,
                                                                               int global_layer, const char* file,
                                                                               int line) {
  if (closed_) return absl::FailedPreconditionError("append_stages on a closed layer stack");
  SEAM_RETURN_IF_ERROR(CheckPiece());
  ++appends_;
  const std::string source = absl::StrCat(BaseName(file), ":", line, ", append ", appends_, " of its layer stack");
  for (const StageItem& item : items) {
    if (item.declaration.place.bound) return errors::DeclarationAlreadyBound(item.declaration.place.source);
    SEAM_RETURN_IF_ERROR(ValidateOptions(item.declaration.kind, item.options));
    if (item.read != nullptr && !SameCaps(item.read->caps(), item.declaration.readout_caps)) {
      return absl::InvalidArgumentError(absl::StrCat("the ", item.read->name(),
                                                     " read's capabilities differ from the declaration's readout_caps (",
                                                     source, ")"));
    }
  }
  if (options_.stage_facts) {
    std::vector<StageDeclaration> facts = options_.stage_facts(global_layer);
    bool same = facts.size() == items.size();
    for (size_t i = 0; same && i < items.size(); ++i) {
      same = facts[i].kind == items[i].declaration.kind && facts[i].reduction == items[i].declaration.reduction &&
             facts[i].sparse == items[i].declaration.sparse;
    }
    if (!same) {
      return absl::InvalidArgumentError(absl::StrCat("layer ", global_layer, " declares ", items.size(),
                                                     " stages that differ from its stage facts (", source, ")"));
    }
  }
  std::vector<std::shared_ptr<StageBoundary>> out;
  for (StageItem& item : items) {
    auto b = std::make_shared<StageBoundary>(std::move(item.declaration), item.norm, std::move(item.options),
                                             std::move(item.read));
    stages_.push_back(Entry{b, global_layer, source});
    // The previous stage now knows its consumer.
    if (stages_.size() >= 2) {
      SEAM_RETURN_IF_ERROR(BindAt(stages_.size() - 2, NeighbourFacts{true, b->declaration()}));
    }
    out.push_back(std::move(b));
  }
  return out;
}

absl::StatusOr<std::vector<std::shared_ptr<StageBoundary>>> AppendStagesAt(const char* file, int line,
                                                                           int global_layer,
                                                                           std::vector<StageItem> items) {
  LayerStack* stack = LayerStack::Current();
  if (stack == nullptr) return errors::AppendWithoutStack();
  return stack->Append(std::move(items), global_layer, file, line);
}

}  // namespace seam::boundary
