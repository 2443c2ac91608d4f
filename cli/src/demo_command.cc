// `seam demo`: a tensor-parallel norm + gated MLP + add&norm block run by N
// rank threads over real Gloo (TCP loopback), checked against one rank.
#include "demo_command.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <random>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "command_status.h"
#include "seam/comm/collective.h"
#include "seam/comm/gloo_communicator.h"
#include "seam/comm/store.h"
#include "seam/core/status.h"
#include "seam/core/temp_dir.h"
#include "seam/kernels/ops.h"

namespace seam::cli {
namespace {

constexpr float kEps = 1e-6f;
constexpr float kTolerance = 1e-4f;

// The full (unsharded) data every rank derives from the seed.
struct DemoData {
  int64_t rows, hidden, inner;
  std::vector<float> x, residual, norm1, norm2, gate_up, down;  // gate_up [2I, H], down [H, I]
};

std::vector<float> Uniform(std::mt19937_64& gen, int64_t n, float scale, float offset = 0.0f) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& f : v) f = offset + scale * dist(gen);
  return v;
}

DemoData MakeData(const DemoCommandOptions& o) {
  DemoData d{o.rows, o.hidden, o.ranks * ((2 * o.hidden + o.ranks - 1) / o.ranks), {}, {}, {}, {}, {}, {}};
  std::mt19937_64 gen(o.seed);
  d.x = Uniform(gen, d.rows * d.hidden, 1.0f);
  d.residual = Uniform(gen, d.rows * d.hidden, 1.0f);
  d.norm1 = Uniform(gen, d.hidden, 0.5f, 1.0f);
  d.norm2 = Uniform(gen, d.hidden, 0.5f, 1.0f);
  d.gate_up = Uniform(gen, 2 * d.inner * d.hidden, 1.0f / std::sqrt(static_cast<float>(d.hidden)));
  d.down = Uniform(gen, d.hidden * d.inner, 1.0f / std::sqrt(static_cast<float>(d.inner)));
  return d;
}

// What one rank (or the reference) ends with.
struct BlockResult {
  Tensor act;       // silu(gate)·up: [R, I] (reference) or the all-gathered shards [N·R, I/N]
  Tensor mlp;       // the completed MLP output [R, H]
  Tensor out;       // norm of residual + mlp [R, H]
  Tensor residual;  // residual after the update [R, H]
  std::vector<comm::CollectiveRecord> collectives;
};

// Runs the block on weight shard `shard` of `shards`; `tp` completes the sums (null: one rank).
absl::StatusOr<BlockResult> RunBlock(const DemoData& d, int shard, int shards, comm::Communicator* tp) {
  const int64_t R = d.rows, H = d.hidden, Is = d.inner / shards;
  std::vector<float> gate_up, down;
  for (int half = 0; half < 2; ++half) {  // gate rows then up rows of this shard
    const auto begin = d.gate_up.begin() + (half * d.inner + shard * Is) * H;
    gate_up.insert(gate_up.end(), begin, begin + Is * H);
  }
  for (int64_t h = 0; h < H; ++h) {  // columns [shard·Is, (shard+1)·Is) of down
    const auto begin = d.down.begin() + h * d.inner + shard * Is;
    down.insert(down.end(), begin, begin + Is);
  }
  const Tensor x = Tensor::FromFloats(d.x, {R, H});
  BlockResult r;
  r.residual = Tensor::FromFloats(d.residual, {R, H});
  Tensor normed = Tensor::Empty({R, H}, DType::kF32), gu = Tensor::Empty({R, 2 * Is}, DType::kF32);
  Tensor act = Tensor::Empty({R, Is}, DType::kF32);
  r.mlp = Tensor::Empty({R, H}, DType::kF32);
  r.out = Tensor::Empty({R, H}, DType::kF32);
  SEAM_RETURN_IF_ERROR(kernels::RmsNorm(x, Tensor::FromFloats(d.norm1, {H}), kEps, normed));
  SEAM_RETURN_IF_ERROR(kernels::Matmul(normed, Tensor::FromFloats(gate_up, {2 * Is, H}), gu));
  SEAM_RETURN_IF_ERROR(kernels::SiluAndMul(gu, act));
  SEAM_RETURN_IF_ERROR(kernels::Matmul(act, Tensor::FromFloats(down, {H, Is}), r.mlp));
  r.act = act;
  if (tp != nullptr) {
    SEAM_RETURN_IF_ERROR(tp->AllReduce(r.mlp));
    r.collectives.push_back({comm::CollectiveKind::kAllReduce, tp->name(), {R, H}, DType::kF32, {}, -1});
    r.act = Tensor::Empty({shards * R, Is}, DType::kF32);
    SEAM_RETURN_IF_ERROR(tp->AllGather(act, r.act));
    r.collectives.push_back({comm::CollectiveKind::kAllGather, tp->name(), {shards * R, Is}, DType::kF32, {}, -1});
  }
  SEAM_RETURN_IF_ERROR(
      kernels::FusedAddRmsNorm(r.mlp, r.residual, Tensor::FromFloats(d.norm2, {H}), kEps, r.out));
  return r;
}

absl::StatusOr<BlockResult> RunRank(const DemoData& d, int rank, int ranks, std::shared_ptr<comm::Store> store) {
  comm::CommOptions options;
  options.timeout = absl::Seconds(30);
  SEAM_ASSIGN_OR_RETURN(auto tp, comm::MakeGlooCommunicator(comm::MakePrefixStore("tp", std::move(store)), "tp",
                                                            rank, ranks, options));
  return RunBlock(d, rank, ranks, tp.get());
}

float MaxAbsDiff(const Tensor& a, const Tensor& b) {
  const std::vector<float> x = a.ToFloats(), y = b.ToFloats();
  float m = 0.0f;
  for (size_t i = 0; i < x.size(); ++i) m = std::max(m, std::fabs(x[i] - y[i]));
  return m;
}

// Gathered shards [N·R, I/N] (rank-major) rearranged into the reference layout [R, I].
Tensor Unshard(const Tensor& gathered, int ranks, int64_t rows) {
  const std::vector<float> g = gathered.ToFloats();
  const int64_t Is = gathered.dim(1), I = Is * ranks;
  std::vector<float> full(rows * I);
  for (int r = 0; r < ranks; ++r) {
    for (int64_t t = 0; t < rows; ++t) {
      std::copy_n(g.begin() + (r * rows + t) * Is, Is, full.begin() + t * I + r * Is);
    }
  }
  return Tensor::FromFloats(full, {rows, I});
}

std::string Validate(const DemoCommandOptions& o) {
  if (o.ranks < 1 || o.ranks > 64) return absl::StrCat("--ranks must be in [1, 64], got ", o.ranks);
  if (o.rows < 1) return absl::StrCat("--rows must be at least 1, got ", o.rows);
  if (o.hidden < 1) return absl::StrCat("--hidden must be at least 1, got ", o.hidden);
  return "";
}

}  // namespace

absl::Status RunDemoCommand(const DemoCommandOptions& options, std::ostream& out) {
  if (std::string bad = Validate(options); !bad.empty()) return absl::InvalidArgumentError(bad);
  const DemoData data = MakeData(options);
  absl::StatusOr<std::string> made = MakeTempDir("seam-demo-");
  if (!made.ok()) return Failed("the FileStore's directory: ", made.status());
  const std::string dir = *made;
  absl::StatusOr<std::shared_ptr<comm::Store>> store = comm::MakeFileStore(dir);
  if (!store.ok()) {
    std::filesystem::remove_all(dir);
    return Failed("", store.status());
  }

  const auto start = std::chrono::steady_clock::now();
  std::vector<absl::StatusOr<BlockResult>> results(options.ranks, absl::UnknownError("not run"));
  std::vector<std::thread> threads;
  for (int r = 0; r < options.ranks; ++r) {
    threads.emplace_back([&, r] { results[r] = RunRank(data, r, options.ranks, *store); });
  }
  for (std::thread& t : threads) t.join();
  const double elapsed_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  std::filesystem::remove_all(dir);

  absl::StatusOr<BlockResult> reference = RunBlock(data, 0, 1, nullptr);
  if (!reference.ok()) return Failed("reference failed: ", reference.status());
  out << "seam demo: " << options.ranks << " ranks over Gloo (TCP loopback), rows=" << options.rows
      << " hidden=" << options.hidden << " inner=" << data.inner << "\n";
  out << "ops: RmsNorm, Matmul (gate_up shard), SiluAndMul, Matmul (down shard), AllReduce, AllGather, "
         "FusedAddRmsNorm\n";
  float worst = 0.0f;
  bool bitwise_equal_ranks = true;
  for (int r = 0; r < options.ranks; ++r) {
    if (!results[r].ok()) return Failed(absl::StrCat("rank ", r, " failed: "), results[r].status());
    const BlockResult& got = *results[r];
    const float e_act = MaxAbsDiff(Unshard(got.act, options.ranks, options.rows), reference->act);
    const float e_mlp = MaxAbsDiff(got.mlp, reference->mlp);
    const float e_out = MaxAbsDiff(got.out, reference->out);
    const float e_res = MaxAbsDiff(got.residual, reference->residual);
    out << "rank " << r << ": max abs error  act " << e_act << "  mlp " << e_mlp << "  out " << e_out
        << "  residual " << e_res << "\n";
    worst = std::max({worst, e_act, e_mlp, e_out, e_res});
    if (r > 0 && MaxAbsDiff(got.out, results[0]->out) != 0.0f) bitwise_equal_ranks = false;
  }
  out << "collectives per rank:";
  for (const comm::CollectiveRecord& c : results[0]->collectives) {
    out << " " << c.ToString() << " (" << NumElements(c.shape) * DTypeSize(c.dtype) << " bytes);";
  }
  out << "\nranks bitwise equal: " << (bitwise_equal_ranks ? "yes" : "no") << "\n";
  out << "elapsed: " << elapsed_ms << " ms (rendezvous included)\n";
  if (worst > kTolerance || !bitwise_equal_ranks) {
    return absl::InternalError(absl::StrCat("mismatch: max abs error ", worst, " (tolerance ", kTolerance, ")",
                                            bitwise_equal_ranks ? "" : ", ranks disagree"));
  }
  out << "demo OK\n";
  return absl::OkStatus();
}

}  // namespace seam::cli
