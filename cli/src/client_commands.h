// `seam generate` (alias `seam submit`) and `seam status`: gRPC clients of a
// running seam-coordinator's Coordinator service and grpc.health.v1.
#pragma once

#include <cstdint>
#include <ostream>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "seam/security/credentials.h"

namespace seam::cli {

struct GenerateCommandOptions {
  std::string addr;                  // HOST:PORT of the coordinator
  std::vector<std::string> prompts;  // token ids separated by spaces or commas, e.g. "3 14 15"
  // Prompts as text (instead of `prompts`): the coordinator tokenizes them,
  // and the completions are printed as text.
  std::vector<std::string> text_prompts;
  int max_new_tokens = 16;
  float temperature = 0;             // 0: greedy
  int top_k = 0;                     // 0: off
  float top_p = 1;                   // 1: off
  std::optional<uint64_t> seed;  // unset: the coordinator draws a fresh one per call
  bool stream = false;               // Generate (streamed) instead of GenerateAll
  bool json = false;                 // one JSON document on stdout
  double timeout_s = 60;
  security::ClientSecurityOptions security;  // --tls-ca, --auth-token-file, client certificate
};

// Prints the tokens on `out`. INVALID_ARGUMENT (exit 2): a bad flag or an
// unreadable credential file; UNAUTHENTICATED (exit 1): the coordinator
// wants a (different) --auth-token-file; any
// other error (exit 1): the call failed, with the gRPC code's name in the
// message (UNAVAILABLE: the coordinator is down; FAILED_PRECONDITION: it
// refused the request).
absl::Status RunGenerateCommand(const GenerateCommandOptions& options, std::ostream& out);

struct StatusCommandOptions {
  std::string addr;
  bool json = false;
  double timeout_s = 5;
  security::ClientSecurityOptions security;
};

// Prints the report on `out`; OK when the coordinator and every stage are
// SERVING. INVALID_ARGUMENT (exit 2): a bad flag; UNAVAILABLE (exit 1):
// something is not serving (the report is still printed); another error
// (exit 1): GetMetadata failed, the health in the message.
absl::Status RunStatusCommand(const StatusCommandOptions& options, std::ostream& out);

}  // namespace seam::cli
