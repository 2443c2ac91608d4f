// The requests of `seam bench load`, generated from a seed (never
// downloaded): token-id prompts and output lengths drawn from fixed, uniform
// or long-tailed (chat-like) distributions, in one of three shapes:
//   plain          independent requests;
//   shared-prefix  every request opens with the same P-token prefix, then a
//                  unique suffix (the shape prefix caching is measured with);
//   multi-turn     conversations whose every turn sends the whole history
//                  (earlier user turns and answers) plus new user tokens.
// A session is what one client does in order: one request, or the turns of
// a conversation. Pure functions of their arguments.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace seam::cli {

// A length drawn per request:
//   "N"                     always N
//   "uniform:A:B"           uniform over [A, B]
//   "longtail:MEDIAN:MAX"   log-normal with that median and sigma 1 (a few
//                           requests several times the median, as chat
//                           traffic has), clipped to [1, MAX]
struct LengthDistribution {
  enum class Kind { kFixed, kUniform, kLongTail };
  Kind kind = Kind::kFixed;
  int64_t min = 1, max = 1;  // kFixed: min == max; kLongTail: [1, max]
  double median = 1;         // kLongTail only
  std::string ToString() const;
};
// INVALID_ARGUMENT naming the text for anything else (or lengths below 1).
absl::StatusOr<LengthDistribution> ParseLengthDistribution(const std::string& text);

struct WorkloadOptions {
  enum class Shape { kPlain, kSharedPrefix, kMultiTurn };
  Shape shape = Shape::kPlain;
  int sessions = 16;            // requests, or conversations for kMultiTurn
  LengthDistribution prompt;    // kPlain: the prompt; kSharedPrefix: the unique suffix; kMultiTurn: each user turn
  LengthDistribution output;    // max_tokens of each request (every token is generated: no stop)
  int64_t shared_prefix = 0;    // kSharedPrefix: P
  int turns = 1;                // kMultiTurn: turns per conversation
  int64_t vocab = 0;            // token ids are drawn from [2, vocab) (0, 1: random checkpoints' BOS, EOS)
  uint64_t seed = 1;
};

// "plain", "shared-prefix:P" or "multi-turn:T" into shape, shared_prefix and
// turns. INVALID_ARGUMENT naming the text otherwise.
absl::Status ParseWorkloadShape(const std::string& text, WorkloadOptions* options);
std::string WorkloadShapeName(const WorkloadOptions& options);

// One request of a session. Its prompt is, in order: the history of the
// earlier turns (each turn's user tokens, then its answer), then `user`.
struct Turn {
  std::vector<int32_t> user;
  int64_t max_tokens = 1;
};

struct Session {
  std::vector<Turn> turns;
  // Prompt length of turn t when every earlier turn's answer had its max_tokens.
  int64_t PromptTokens(size_t turn) const;
};

struct Workload {
  WorkloadOptions options;
  std::vector<Session> sessions;
  int64_t requests() const;
  int64_t prompt_tokens() const;  // over every request, history included
  int64_t output_tokens() const;  // the max_tokens of every request
  int64_t longest_context() const;  // the most tokens one request's KV holds (prompt + answer)
};

// INVALID_ARGUMENT for a vocabulary below 3, no sessions or turns, or a
// shared prefix below 1 for kSharedPrefix.
absl::StatusOr<Workload> GenerateWorkload(const WorkloadOptions& options);

// Open-loop arrival offsets in seconds of `sessions` sessions at `rate` per
// second: a Poisson process (exponential gaps) from `seed`, starting at 0.
// A rate of 0 or below (infinite) puts every session at 0.
std::vector<double> PoissonArrivals(int sessions, double rate, uint64_t seed);

}  // namespace seam::cli
