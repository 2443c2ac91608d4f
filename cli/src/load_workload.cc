// load_workload.h: seeded lengths, token ids and arrivals. The generator is
// SplitMix64 with its own uniform and normal draws, so a seed gives the same
// workload with any standard library.
#include "load_workload.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace seam::cli {
namespace {

class Random {
 public:
  explicit Random(uint64_t seed) : state_(seed) {}
  uint64_t Next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  double Uniform() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }  // [0, 1)
  int64_t Between(int64_t lo, int64_t hi) {  // [lo, hi]
    return lo + static_cast<int64_t>(Next() % static_cast<uint64_t>(hi - lo + 1));
  }
  double Normal() {  // Box-Muller
    const double u = 1.0 - Uniform(), v = Uniform();
    return std::sqrt(-2.0 * std::log(u)) * std::cos(2.0 * M_PI * v);
  }

 private:
  uint64_t state_;
};

// A stream of its own for each session (and one for the shared prefix), so
// a workload of more sessions keeps the first ones.
uint64_t StreamSeed(uint64_t seed, uint64_t stream) { return Random(seed * 0x100000001b3ULL + stream).Next(); }

int64_t Draw(const LengthDistribution& d, Random& r) {
  switch (d.kind) {
    case LengthDistribution::Kind::kFixed: return d.min;
    case LengthDistribution::Kind::kUniform: return r.Between(d.min, d.max);
    case LengthDistribution::Kind::kLongTail: {
      const double x = d.median * std::exp(r.Normal());
      return std::clamp<int64_t>(static_cast<int64_t>(std::llround(x)), 1, d.max);
    }
  }
  return d.min;
}

std::vector<int32_t> Tokens(int64_t n, int64_t vocab, Random& r) {
  std::vector<int32_t> out(static_cast<size_t>(n));
  for (int32_t& t : out) t = static_cast<int32_t>(r.Between(2, vocab - 1));
  return out;
}

absl::Status BadLength(const std::string& text) {
  return absl::InvalidArgumentError(absl::StrCat("length distribution '", text,
                                                 "': expected N, uniform:A:B or longtail:MEDIAN:MAX with 1 <= A <= B "
                                                 "and 1 <= MEDIAN <= MAX"));
}

}  // namespace

std::string LengthDistribution::ToString() const {
  switch (kind) {
    case Kind::kFixed: return absl::StrCat(min);
    case Kind::kUniform: return absl::StrCat("uniform:", min, ":", max);
    case Kind::kLongTail: return absl::StrCat("longtail:", static_cast<int64_t>(median), ":", max);
  }
  return "";
}

absl::StatusOr<LengthDistribution> ParseLengthDistribution(const std::string& text) {
  const std::vector<std::string> parts = absl::StrSplit(text, ':');
  LengthDistribution d;
  int64_t a = 0, b = 0;
  if (parts.size() == 1 && absl::SimpleAtoi(parts[0], &a) && a >= 1) {
    d.min = d.max = a;
    return d;
  }
  if (parts.size() != 3 || !absl::SimpleAtoi(parts[1], &a) || !absl::SimpleAtoi(parts[2], &b) || a < 1 || b < a) {
    return BadLength(text);
  }
  if (parts[0] == "uniform") {
    d.kind = LengthDistribution::Kind::kUniform;
    d.min = a, d.max = b;
  } else if (parts[0] == "longtail") {
    d.kind = LengthDistribution::Kind::kLongTail;
    d.median = static_cast<double>(a), d.min = 1, d.max = b;
  } else {
    return BadLength(text);
  }
  return d;
}

absl::Status ParseWorkloadShape(const std::string& text, WorkloadOptions* o) {
  const std::vector<std::string> parts = absl::StrSplit(text, ':');
  int64_t n = 0;
  if (parts.size() == 1 && parts[0] == "plain") {
    o->shape = WorkloadOptions::Shape::kPlain;
    return absl::OkStatus();
  }
  if (parts.size() == 2 && absl::SimpleAtoi(parts[1], &n) && n >= 1) {
    if (parts[0] == "shared-prefix") {
      o->shape = WorkloadOptions::Shape::kSharedPrefix;
      o->shared_prefix = n;
      return absl::OkStatus();
    }
    if (parts[0] == "multi-turn" && n <= 1000) {
      o->shape = WorkloadOptions::Shape::kMultiTurn;
      o->turns = static_cast<int>(n);
      return absl::OkStatus();
    }
  }
  return absl::InvalidArgumentError(
      absl::StrCat("workload '", text, "': expected plain, shared-prefix:P (P >= 1) or multi-turn:T (1 <= T <= 1000)"));
}

std::string WorkloadShapeName(const WorkloadOptions& o) {
  switch (o.shape) {
    case WorkloadOptions::Shape::kPlain: return "plain";
    case WorkloadOptions::Shape::kSharedPrefix: return absl::StrCat("shared-prefix:", o.shared_prefix);
    case WorkloadOptions::Shape::kMultiTurn: return absl::StrCat("multi-turn:", o.turns);
  }
  return "";
}

int64_t Session::PromptTokens(size_t turn) const {
  int64_t n = 0;
  for (size_t t = 0; t < turn && t < turns.size(); ++t) n += static_cast<int64_t>(turns[t].user.size()) + turns[t].max_tokens;
  return turn < turns.size() ? n + static_cast<int64_t>(turns[turn].user.size()) : n;
}

int64_t Workload::requests() const {
  int64_t n = 0;
  for (const Session& s : sessions) n += static_cast<int64_t>(s.turns.size());
  return n;
}

int64_t Workload::prompt_tokens() const {
  int64_t n = 0;
  for (const Session& s : sessions) {
    for (size_t t = 0; t < s.turns.size(); ++t) n += s.PromptTokens(t);
  }
  return n;
}

int64_t Workload::output_tokens() const {
  int64_t n = 0;
  for (const Session& s : sessions) {
    for (const Turn& t : s.turns) n += t.max_tokens;
  }
  return n;
}

int64_t Workload::longest_context() const {
  int64_t most = 0;
  for (const Session& s : sessions) most = std::max(most, s.PromptTokens(s.turns.size()));
  return most;
}

absl::StatusOr<Workload> GenerateWorkload(const WorkloadOptions& o) {
  if (o.vocab < 3) return absl::InvalidArgumentError(absl::StrCat("the vocabulary (", o.vocab, ") is below 3 tokens"));
  if (o.sessions < 1 || o.turns < 1) return absl::InvalidArgumentError("a workload needs at least one request");
  const bool shared = o.shape == WorkloadOptions::Shape::kSharedPrefix;
  if (shared && o.shared_prefix < 1) return absl::InvalidArgumentError("a shared prefix needs at least one token");
  Workload w;
  w.options = o;
  Random prefix_random(StreamSeed(o.seed, 0));
  const std::vector<int32_t> prefix = shared ? Tokens(o.shared_prefix, o.vocab, prefix_random) : std::vector<int32_t>{};
  const int turns = o.shape == WorkloadOptions::Shape::kMultiTurn ? o.turns : 1;
  for (int s = 0; s < o.sessions; ++s) {
    Random r(StreamSeed(o.seed, static_cast<uint64_t>(s) + 1));
    Session session;
    for (int t = 0; t < turns; ++t) {
      Turn turn;
      turn.user = prefix;
      const std::vector<int32_t> own = Tokens(Draw(o.prompt, r), o.vocab, r);
      turn.user.insert(turn.user.end(), own.begin(), own.end());
      turn.max_tokens = Draw(o.output, r);
      session.turns.push_back(std::move(turn));
    }
    w.sessions.push_back(std::move(session));
  }
  return w;
}

std::vector<double> PoissonArrivals(int sessions, double rate, uint64_t seed) {
  std::vector<double> out(static_cast<size_t>(std::max(0, sessions)), 0.0);
  if (!(rate > 0) || std::isinf(rate)) return out;
  Random r(StreamSeed(seed, 0x9e3779b9ULL));
  double t = 0;
  for (size_t i = 1; i < out.size(); ++i) {
    t += -std::log(1.0 - r.Uniform()) / rate;
    out[i] = t;
  }
  return out;
}

}  // namespace seam::cli
