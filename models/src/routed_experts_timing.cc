// RoutedExperts::TimePaths (routed_experts.h): the fused and the grouped
// path of one layer's experts, each timed on its weights at the row counts
// of TimedRowBuckets, so that MoeExperts::kAuto runs each batch through the
// faster one (expert_path_choice.h). Runs at load on a stream of its own,
// never inside another capture: each path is captured into a graph of
// kCallsPerGraph calls on that stream and replayed kReps times between
// timing events (as a decode step's graph runs it), the median kept.
#include <algorithm>
#include <random>
#include <vector>

#include "seam/core/cuda_graph.h"
#include "seam/core/cuda_timer.h"
#include "seam/core/status.h"
#include "seam/kernels/stream.h"
#include "src/routed_experts.h"

namespace seam::models::internal {

namespace {

constexpr int kCallsPerGraph = 4;
constexpr int kReps = 5;

// Each of `rows` rows routes to `top_k` distinct ids out of `route_ids`,
// uniformly, ascending within the row (as SortRoutesByExpert leaves them).
std::vector<int32_t> RandomRoutes(int64_t rows, int64_t top_k, int64_t route_ids, uint32_t seed) {
  std::mt19937 gen(seed);
  std::vector<int32_t> all(static_cast<size_t>(route_ids));
  for (int64_t i = 0; i < route_ids; ++i) all[static_cast<size_t>(i)] = static_cast<int32_t>(i);
  std::vector<int32_t> ids;
  ids.reserve(static_cast<size_t>(rows * top_k));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t j = 0; j < top_k; ++j) {  // a partial shuffle: the first top_k of a random permutation
      std::uniform_int_distribution<int64_t> pick(j, route_ids - 1);
      std::swap(all[static_cast<size_t>(j)], all[static_cast<size_t>(pick(gen))]);
    }
    std::vector<int32_t> row(all.begin(), all.begin() + top_k);
    std::sort(row.begin(), row.end());
    ids.insert(ids.end(), row.begin(), row.end());
  }
  return ids;
}

// The median of `reps` replays of `graph`, per call.
absl::StatusOr<double> MedianUs(const CudaGraph& graph, const CudaStream& stream, CudaTimer& timer) {
  std::vector<double> us;
  for (int i = 0; i < kReps; ++i) {
    SEAM_RETURN_IF_ERROR(timer.Start(stream));
    SEAM_RETURN_IF_ERROR(graph.Launch(stream));
    SEAM_ASSIGN_OR_RETURN(double t, timer.StopUs(stream));
    us.push_back(t / kCallsPerGraph);
  }
  std::sort(us.begin(), us.end());
  return us[us.size() / 2];
}

}  // namespace

absl::StatusOr<ExpertPathTable> RoutedExperts::TimePaths(int64_t route_ids) const {
  const Device dev = gate_up_.device();
  const DType dt = gate_up_.dtype();
  const int64_t h = gate_up_.dim(2), inner = down_.dim(2), k = top_k_;
  SEAM_ASSIGN_OR_RETURN(CudaStream stream, CudaStream::Create(dev));
  SEAM_ASSIGN_OR_RETURN(CudaTimer timer, CudaTimer::Create(dev));
  kernels::ScopedStream on(stream.handle());
  std::vector<ExpertPathTiming> timings;
  for (int64_t rows : TimedRowBuckets(grouped_max_rows())) {
    const int64_t pairs = rows * k;
    const std::vector<int32_t> host_ids = RandomRoutes(rows, k, route_ids, static_cast<uint32_t>(rows));
    SEAM_ASSIGN_OR_RETURN(Tensor ids, Tensor::FromInts(host_ids, {rows, k}).To(dev));
    std::mt19937 gen(static_cast<uint32_t>(rows) + 1);
    std::uniform_real_distribution<float> value(-1.0f, 1.0f);
    std::vector<float> xs(static_cast<size_t>(rows * h));
    for (float& v : xs) v = value(gen);
    SEAM_ASSIGN_OR_RETURN(Tensor x, Tensor::FromFloats(xs, {rows, h}, dt).To(dev));
    SEAM_ASSIGN_OR_RETURN(kernels::ExpertGroups groups, kernels::ExpertGroups::Empty(experts(), pairs, dev));
    SEAM_ASSIGN_OR_RETURN(Tensor gate_up, Tensor::TryEmpty({pairs, 2 * inner}, dt, dev));
    SEAM_ASSIGN_OR_RETURN(Tensor act, Tensor::TryEmpty({pairs, inner}, dt, dev));
    SEAM_ASSIGN_OR_RETURN(Tensor out, Tensor::TryEmpty({pairs, h}, dt, dev));
    SEAM_RETURN_IF_ERROR(kernels::GroupByExpert(ids, groups));
    double us[2] = {0, 0};
    for (ExpertPath path : {ExpertPath::kFused, ExpertPath::kGrouped}) {
      auto call = [&] { return RunGroupedOn(x, groups, path, gate_up, act, out); };
      SEAM_RETURN_IF_ERROR(call());  // warm-up (and the first launch's setup) outside the graph
      SEAM_RETURN_IF_ERROR(stream.Synchronize());
      SEAM_ASSIGN_OR_RETURN(CudaGraph graph, CudaGraph::Capture(stream, [&]() -> absl::Status {
                              for (int i = 0; i < kCallsPerGraph; ++i) SEAM_RETURN_IF_ERROR(call());
                              return absl::OkStatus();
                            }));
      SEAM_RETURN_IF_ERROR(graph.Launch(stream));  // the graph's first replay uploads it
      SEAM_ASSIGN_OR_RETURN(us[path == ExpertPath::kFused ? 0 : 1], MedianUs(graph, stream, timer));
    }
    timings.push_back({rows, us[0], us[1]});
  }
  SEAM_RETURN_IF_ERROR(stream.Synchronize());
  return ExpertPathTable::FromTimings(std::move(timings));
}

}  // namespace seam::models::internal
