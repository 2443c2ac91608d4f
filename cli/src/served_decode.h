// The served side of `seam bench serve`: B concurrent streaming Generate
// calls (one prompt each, greedy) against a running seam-coordinator, timed
// per streamed response on the client. The caller owns the stub.
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "seam/v1/coordinator_service.grpc.pb.h"

namespace seam::cli {

struct ServedWorkload {
  int batch = 1;         // concurrent Generate calls, one prompt each
  int prompt_len = 128;  // prompt tokens
  int new_tokens = 64;   // max_new_tokens (no stop tokens, so every sequence makes them all)
  int64_t vocab = 0;     // prompt tokens are drawn from [2, vocab)
  uint64_t round = 0;    // varies the prompts between rounds (and names the requests); timed rounds use 0
  double timeout_s = 600;
};

struct ServedFigures {
  int64_t tokens = 0;        // generated, over every sequence
  double wall_seconds = 0;   // first submit to last token
  double tokens_per_s = 0;   // tokens / wall_seconds
  double ttft_p50_ms = 0, ttft_p99_ms = 0;  // submit to first token
  // Median over sequences of a sequence's mean decode step (LatencySamples::decode_step).
  double ms_per_step = 0;
  double itl_p50_ms = 0, itl_p99_ms = 0;    // gaps between a sequence's successive tokens
  double e2e_p50_ms = 0;                    // submit to last token
};

// Token `position` of sequence `sequence`'s prompt in round `round`: spread
// over [2, vocab) (0 and 1 are the random checkpoints' BOS and EOS). The
// in-process baseline uses the same prompts.
int32_t BenchPromptToken(int sequence, int position, uint64_t round, int64_t vocab);

// Sends the workload's calls at once (each from its own thread, released
// together) and waits for all. INTERNAL naming the sequence and the gRPC code
// when a call fails; FAILED_PRECONDITION when a sequence finished with fewer
// than new_tokens tokens.
absl::StatusOr<ServedFigures> RunServedWorkload(v1::Coordinator::Stub& stub, const ServedWorkload& workload);

}  // namespace seam::cli
